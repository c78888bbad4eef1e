/*
 * ddl_xact.c — creating and dropping shared tables inside a transaction
 * block (cpht in shared_preload_libraries), as migration tools do.
 *
 * A table created inside a block is created in the cpht worker at once,
 * so the transaction can use it, with the creating (sub)transaction in
 * its catalog entry (CphtCatalogEntry.create_xid): other sessions do not
 * see it (cpht_open says it does not exist, cpht_tables() does not list
 * it) until that commits.  A rollback, of the transaction or of the
 * savepoint it was created after, drops it and frees its memory and
 * entry; the commit tells the worker it is everyone's now.
 *
 * A drop inside a block is noted and sent at commit: until then the table
 * and its keys stay, other sessions go on using it, and this session
 * no longer sees it; a rollback forgets the drop.
 *
 * Both hold, until the transaction ends, an exclusive lock on the table's
 * name in the database (an advisory lock tag of cpht's own, field 4 =
 * CPHT_NAME_LOCK_SPACE, which pg_advisory_lock never uses).  Every
 * cpht_create with a name and every cpht_drop of a shared table takes it,
 * so a second session creating the same name waits for the first, as an
 * insert into a unique index waits for the transaction that inserted the
 * same key, and then finds the table (or, after a rollback, creates it);
 * cpht_create(..., if_not_exists => true) relies on it.  The deadlock
 * detector sees these waits; they are canceled as any lock wait.
 *
 * Durable tables.  The creating (sub)transaction's xid goes into the
 * worker's CREATE record, after an XID record of this backend (so the xid
 * is not given again after a crash); the worker writes no snapshot file
 * and no pg_cpht/catalog line for the table until the commit, and keeps
 * the WAL from its CREATE record meanwhile (worker/durable_rounds.c).
 * After a crash at any point, the CREATE record is replayed only if that
 * xid committed: a table whose creation was rolled back, or never
 * committed, leaves no file and no catalog line.  A drop is written by
 * the worker only once the transaction committed, so a rollback loses
 * nothing; a crash between the commit and the worker's drop leaves the
 * table in place (drop it again).
 *
 * The callbacks never raise (the transaction has ended): a worker that
 * cannot be told gets a WARNING.
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "client/client.h"
#include "worker/worker.h"

#define CPHT_NAME_LOCK_SPACE 0x4350	/* "CP" */

typedef struct NotedDdl
{
	int32		entry;
	uint64		table_id;
	bool		drop;			/* false: created in this transaction */
	NameData	name;
	int			level;			/* nesting level that noted it */
} NotedDdl;

static NotedDdl *noted = NULL;
static int	nnoted = 0;
static int	maxnoted = 0;

void
cpht_ddl_lock_name(const char *name)
{
	LOCKTAG		tag;
	uint64		h = hash_bytes_extended((const unsigned char *) name, strlen(name), 0);

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 CPHT_NAME_LOCK_SPACE);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

bool
cpht_ddl_in_block(void)
{
	return IsTransactionBlock() || IsSubTransaction();
}

TransactionId
cpht_ddl_create_xid(bool durable)
{
	TransactionId xid;

	if (!cpht_ddl_in_block())
		return InvalidTransactionId;
	xid = GetCurrentTransactionId();
	/* the xid is in WAL before the worker's CREATE record names it */
	if (durable)
		cpht_wal_mark_xid(xid);
	return xid;
}

static void
note(int32 entry, uint64 table_id, const char *name, bool drop)
{
	if (nnoted == maxnoted)
	{
		maxnoted = maxnoted ? maxnoted * 2 : 8;
		noted = noted ? repalloc(noted, sizeof(NotedDdl) * maxnoted)
			: MemoryContextAlloc(TopMemoryContext, sizeof(NotedDdl) * maxnoted);
	}
	/* the request at commit or rollback goes through this slot */
	cpht_client_attach();
	noted[nnoted].entry = entry;
	noted[nnoted].table_id = table_id;
	noted[nnoted].drop = drop;
	namestrcpy(&noted[nnoted].name, name);
	noted[nnoted].level = GetCurrentTransactionNestLevel();
	nnoted++;
}

void
cpht_ddl_note_create(int32 entry, uint64 table_id, const char *name)
{
	note(entry, table_id, name, false);
}

void
cpht_ddl_note_drop(int32 entry, uint64 table_id, const char *name)
{
	note(entry, table_id, name, true);
}

bool
cpht_ddl_drop_pending(int32 entry, uint64 table_id)
{
	for (int i = 0; i < nnoted; i++)
		if (noted[i].drop && noted[i].entry == entry && noted[i].table_id == table_id)
			return true;
	return false;
}

bool
cpht_shared_entry_visible(int32 entry, const CphtCatalogEntry *e)
{
	if (TransactionIdIsValid(e->create_xid) &&
		!TransactionIdIsCurrentTransactionId(e->create_xid) &&
		!TransactionIdDidCommit(e->create_xid))
		return false;
	return !cpht_ddl_drop_pending(entry, e->table_id);
}

/* DROP or CREATE_COMMIT of noted item i; a WARNING when it fails. */
static void
tell_worker(const NotedDdl *d, CphtOp op)
{
	CphtReply  *rep = NULL;

	if (cpht_client_idle())
	{
		CphtRequest *req = cpht_client_request();

		req->op = op;
		req->entry = d->entry;
		req->table_id = d->table_id;
		rep = cpht_client_send_quiet();
	}
	/* gone already: dropped with its database or extension, or lost */
	if (rep != NULL && (rep->sqlerrcode == 0 || rep->sqlerrcode == ERRCODE_UNDEFINED_OBJECT))
		return;
	if (op == CPHT_OP_CREATE_COMMIT)
		ereport(WARNING,
				(errmsg("the cpht worker could not be told that shared cpht table \"%s\" was created", NameStr(d->name)),
				 rep == NULL ? errdetail("No cpht worker could be told.") :
				 errdetail("The cpht worker answered: %s", rep->message)));
	else
		ereport(WARNING,
				(errmsg("shared cpht table \"%s\" could not be dropped", NameStr(d->name)),
				 rep == NULL ? errdetail("No cpht worker could be told.") :
				 errdetail("The cpht worker answered: %s", rep->message),
				 errhint("Drop it with cpht_drop(cpht_open(%s)).", quote_literal_cstr(NameStr(d->name)))));
}

/* Whether the table of item i is dropped by a later item. */
static bool
dropped_later(int i)
{
	for (int k = i + 1; k < nnoted; k++)
		if (noted[k].drop && noted[k].entry == noted[i].entry &&
			noted[k].table_id == noted[i].table_id)
			return true;
	return false;
}

static void
at_xact_event(XactEvent event, void *arg)
{
	(void) arg;
	if (nnoted == 0)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot prepare a transaction that created or dropped shared cpht tables"),
					 errdetail("The cpht worker keeps or undoes the creation or drop only when the transaction ends in its session.")));
			break;
		case XACT_EVENT_COMMIT:
			for (int i = 0; i < nnoted; i++)
			{
				if (noted[i].drop)
				{
					/* dropped twice (in two savepoints): once is enough */
					if (!dropped_later(i))
						tell_worker(&noted[i], CPHT_OP_DROP);
				}
				else if (!dropped_later(i))
					tell_worker(&noted[i], CPHT_OP_CREATE_COMMIT);
			}
			nnoted = 0;
			break;
		case XACT_EVENT_ABORT:
			/* newest first: what was created goes, drops are forgotten */
			for (int i = nnoted - 1; i >= 0; i--)
				if (!noted[i].drop)
					tell_worker(&noted[i], CPHT_OP_DROP);
			nnoted = 0;
			break;
		default:
			break;
	}
}

static void
at_subxact_event(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	(void) mySubid;
	(void) parentSubid;
	(void) arg;
	if (nnoted == 0)
		return;
	/* the tables created in the subtransaction rolled back go with it */
	if (event == SUBXACT_EVENT_ABORT_SUB)
		for (int i = nnoted - 1; i >= 0; i--)
			if (noted[i].level >= level && !noted[i].drop)
				tell_worker(&noted[i], CPHT_OP_DROP);
	cpht_noted_subxact_end(event, noted, &nnoted, sizeof(NotedDdl), offsetof(NotedDdl, level));
}

void
cpht_ddl_xact_init(void)
{
	RegisterXactCallback(at_xact_event, NULL);
	RegisterSubXactCallback(at_subxact_event, NULL);
}
