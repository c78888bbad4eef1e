/*
 * registry.c — the shared tables the cpht worker holds: its table of them
 * by catalog index (the catalog entry in shared memory says what a backend
 * sees; tables[] and table_ids[] here hold the table itself), finding the
 * one a request names, creating, dropping, installing (a durable table
 * restored), losing one, and the catalog's figures after a write.
 *
 * Invariants: tables[i] is the live table of catalog entry i exactly when
 * table_ids[i] is that entry's table_id; ids grow with every table and are
 * never reused while the server runs, so a handle names one table or none.
 * Only the worker's process touches tables[]; the catalog entries are
 * changed under the catalog lock, which backends take to read them.
 */
#include "postgres.h"

#include "access/transam.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/procarray.h"
#include "port/pg_bitutils.h"
#include "portability/instr_time.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cpht_table.h"
#include "shmem/protocol.h"
#include "worker/worker_internal.h"
#include "worker/durable.h"
#include "worker/xacts.h"

static cpht_table **tables = NULL;	/* by catalog index */
static uint64 *table_ids = NULL;

/* The first table id this worker gives (ids are never reused while the
 * server runs). */
static uint64 first_table_id = 0;

void
cpht_worker_shared_init(void)
{
	CphtControl *ctl = cpht_control;

	tables = MemoryContextAllocZero(TopMemoryContext, sizeof(cpht_table *) * ctl->max_tables);
	table_ids = MemoryContextAllocZero(TopMemoryContext, sizeof(uint64) * ctl->max_tables);
	cpht_xacts_init();

	/* What a previous worker held is gone with its memory. */
	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	first_table_id = ctl->next_table_id;
	ctl->first_table_id = first_table_id;	/* for backends (session/shared_handles.c) */
	for (int i = 0; i < ctl->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];

		if (e->state == CPHT_ENTRY_LIVE)
		{
			e->state = CPHT_ENTRY_LOST;
			if (e->lost_reason[0] == '\0')
				strlcpy(e->lost_reason, "the cpht worker restarted", CPHT_TEXT_LEN);
		}
		else if (e->state == CPHT_ENTRY_CREATING)
			e->state = CPHT_ENTRY_FREE;
	}
	LWLockRelease(ctl->catalog_lock);
}

/* The live table a request names; ERROR if it is gone. */
cpht_table *
cpht_worker_request_table(const CphtRequest *req)
{
	CphtCatalogEntry *e;

	if (req->private_table)
		return cpht_private_table(cpht_worker_serving(), req->table_id);
	if (req->entry < 0 || req->entry >= cpht_control->max_tables)
		elog(ERROR, "cpht request names table entry %d of %d", req->entry,
			 cpht_control->max_tables);
	e = &cpht_catalog[req->entry];
	/* the restore may still replay WAL into a durable table */
	if (cpht_durable_restoring() && e->durable)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shared cpht table \"%s\" is being restored", NameStr(e->name)),
				 errdetail("The cpht worker restarted and restores the durable shared tables."),
				 errhint("Open the table again with cpht_open('%s'), which waits for the restore.",
						 NameStr(e->name))));
	if (tables[req->entry] != NULL && table_ids[req->entry] == req->table_id)
		return tables[req->entry];

	if (e->state == CPHT_ENTRY_LOST && e->table_id == req->table_id)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("shared cpht table \"%s\" was lost", NameStr(e->name)),
				 errdetail("Its memory was in a cpht worker that exited: %s.", e->lost_reason),
				 errhint("Create it again with cpht_create(..., name => %s).", quote_literal_cstr(NameStr(e->name)))));
	/* ids grow with every table: a smaller one than this worker's first
	 * was opened before it started */
	if (req->table_id < first_table_id)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("shared cpht table was opened before the cpht worker restarted"),
				 errdetail("Handles of shared tables do not outlive the cpht worker; a durable table is restored by the new worker and reached through a new handle."),
				 errhint("Open the table again with cpht_open().")));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("shared cpht table does not exist"),
			 errdetail("It was dropped.")));
	pg_unreachable();
}

void
cpht_worker_shared_written(const CphtRequest *req, cpht_table *t)
{
	uint64		bytes;

	if (req->private_table)
		return;
	/* a table lost by a call whose undo failed is gone */
	if (tables[req->entry] != t)
		return;
	pg_atomic_write_u64(&cpht_catalog[req->entry].count,
						cpht_xacts_committed_count(req->entry, cpht_table_count(t)));
	/* a write may have grown the table: cpht_tables() shows its bytes */
	bytes = cpht_table_slot_bytes(t);
	if (bytes != cpht_catalog[req->entry].bytes)
	{
		LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
		cpht_catalog[req->entry].bytes = bytes;
		LWLockRelease(cpht_control->catalog_lock);
	}
}

static void drop_abandoned(Oid dboid, const NameData *name);

void
cpht_worker_op_create(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;
	CphtReply  *rep = &slot->rep;
	CphtControl *ctl = cpht_control;
	CphtCatalogEntry *e = NULL;
	cpht_table *table = NULL;
	cpht_status st;
	char		errbuf[CPHT_TEXT_LEN];
	int			i;

	/*
	 * While the restore runs, a new table could take the name or the
	 * catalog entry of a durable table not restored yet (the backend waits
	 * for the restore before it asks; this refuses a request that came
	 * anyway).
	 */
	if (cpht_durable_restoring())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shared cpht tables cannot be created while the cpht worker restores durable tables"),
				 errhint("Create the table again in a moment.")));
	/* within its owner's cap and cpht.max_shared_memory (quota.c) */
	cpht_quota_check_create(&req->name, req->owner, req->memory_cap_kb,
							cpht_params_table_bytes(&req->params));
	drop_abandoned(req->dboid, &req->name);

	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	for (i = 0; i < ctl->max_tables; i++)
	{
		CphtCatalogEntry *o = &cpht_catalog[i];

		if (o->state == CPHT_ENTRY_FREE || o->dboid != req->dboid ||
			strcmp(NameStr(o->name), NameStr(req->name)) != 0)
			continue;
		if (o->state != CPHT_ENTRY_LOST)
		{
			LWLockRelease(ctl->catalog_lock);
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("shared cpht table \"%s\" already exists", NameStr(req->name)),
					 errhint("Open it with cpht_open('%s'), or drop it first.", NameStr(req->name))));
		}
		/* a lost table of that name is replaced */
		o->state = CPHT_ENTRY_FREE;
	}

	/*
	 * One database may hold cpht.max_shared_tables_per_database of the
	 * server's slots, so that it cannot take every one: tables of the
	 * database in any state but free count (a lost one holds its slot
	 * until dropped or replaced).  Only creation is refused: the restore
	 * of durable tables (durable_restore.c's install) takes no notice of it, so
	 * lowering the setting loses no table.
	 */
	{
		int			limit = cpht_tables_per_database_limit();
		int			used = 0;

		for (i = 0; i < ctl->max_tables; i++)
			if (cpht_catalog[i].state != CPHT_ENTRY_FREE && cpht_catalog[i].dboid == req->dboid)
				used++;
		SpinLockAcquire(&ctl->mutex);
		ctl->max_tables_per_database = limit;
		SpinLockRelease(&ctl->mutex);
		if (used >= limit)
		{
			LWLockRelease(ctl->catalog_lock);
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("too many shared cpht tables in this database"),
					 errdetail("A database holds at most %d of the server's %d (cpht.max_shared_tables_per_database).",
							   limit, ctl->max_tables),
					 errhint("Drop a shared table of this database, or raise cpht.max_shared_tables_per_database and reload the configuration.")));
		}
	}
	for (i = 0; i < ctl->max_tables; i++)
	{
		if (cpht_catalog[i].state == CPHT_ENTRY_FREE)
		{
			e = &cpht_catalog[i];
			break;
		}
	}
	if (e == NULL)
	{
		LWLockRelease(ctl->catalog_lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many shared cpht tables"),
				 errdetail("The server holds at most %d (cpht.max_shared_tables).", ctl->max_tables),
				 errhint("Drop a shared table, or raise cpht.max_shared_tables and restart the server.")));
	}
	/* The name is taken while the table is created, outside the lock. */
	memset(e->lost_reason, 0, CPHT_TEXT_LEN);
	e->name = req->name;
	e->dboid = req->dboid;
	e->table_id = 0;
	e->state = CPHT_ENTRY_CREATING;
	LWLockRelease(ctl->catalog_lock);

	errbuf[0] = '\0';
	st = cpht_table_create(&req->params, &table, errbuf, sizeof(errbuf));

	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	if (st != CPHT_OK)
	{
		e->state = CPHT_ENTRY_FREE;
		LWLockRelease(ctl->catalog_lock);
		cpht_worker_reply_status(rep, st, errbuf);
		return;
	}
	/* for undoing a call canceled after its last chunk (run_call) */
	cpht_table_set_logging(table, 1);
	/* the log is emptied after every call: keep room for a window's */
	cpht_table_keep_log(table, 2 * ctl->window_keys + 4096);
	tables[i] = table;
	table_ids[i] = ctl->next_table_id++;
	e->table_id = table_ids[i];
	e->owner = req->owner;
	e->kind = req->params.kind;
	e->device = req->params.device;
	e->key_bits = req->params.auto_key_bits ? 0 : req->params.key_bits;
	e->transactional = req->transactional;
	e->durable = false;
	e->create_lsn = InvalidXLogRecPtr;
	/* created inside a transaction block: others see it once that commits */
	e->create_xid = req->create_xid;
	e->memory_cap_kb = Max(req->memory_cap_kb, 0);
	cpht_xacts_table_created(i, table_ids[i], req->transactional);
	e->capacity = req->capacity;
	e->bytes = cpht_params_table_bytes(&req->params);
	pg_atomic_write_u64(&e->count, 0);
	cpht_table_stats_init(&e->stats, (uint64) GetCurrentTimestamp());
	LWLockRelease(ctl->catalog_lock);

	/* A durable table is logged and saved before anyone can use it. */
	if (req->durable)
	{
		PG_TRY();
		{
			cpht_durable_created(i, table, &req->params);
		}
		PG_CATCH();
		{
			LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
			e->state = CPHT_ENTRY_FREE;
			LWLockRelease(ctl->catalog_lock);
			tables[i] = NULL;
			table_ids[i] = 0;
			cpht_xacts_table_dropped(i);
			cpht_table_destroy(table);
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	e->state = CPHT_ENTRY_LIVE;
	LWLockRelease(ctl->catalog_lock);

	rep->entry = i;
	rep->table_id = table_ids[i];
}

/*
 * The transaction that created table req->entry inside a transaction block
 * committed: the table is everyone's, and a durable one gets its file.  A
 * table gone meanwhile (its database or extension dropped at the same
 * commit, the worker restarted) needs nothing.
 */
void
cpht_worker_op_create_commit(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;

	if (cpht_worker_shared_table(req->entry, req->table_id) == NULL)
		return;
	LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
	cpht_catalog[req->entry].create_xid = InvalidTransactionId;
	LWLockRelease(cpht_control->catalog_lock);
	cpht_durable_create_committed(req->entry);
}

/*
 * Tables of database dboid named name created inside a transaction block
 * that ended without committing and whose session could not tell the
 * worker (it was busy or gone): dropped, so the name is free.
 */
static void
drop_abandoned(Oid dboid, const NameData *name)
{
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];
		TransactionId xid;

		LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
		xid = (e->state == CPHT_ENTRY_LIVE && e->dboid == dboid &&
			   strcmp(NameStr(e->name), NameStr(*name)) == 0) ? e->create_xid : InvalidTransactionId;
		LWLockRelease(cpht_control->catalog_lock);
		if (TransactionIdIsValid(xid) && tables[i] != NULL &&
			!TransactionIdIsInProgress(xid) && !TransactionIdDidCommit(xid))
			cpht_worker_shared_drop(i);
	}
}

void
cpht_worker_op_drop(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;
	cpht_table *t = cpht_worker_request_table(req);

	cpht_durable_dropped(req->entry);
	LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
	cpht_catalog[req->entry].state = CPHT_ENTRY_FREE;
	LWLockRelease(cpht_control->catalog_lock);
	tables[req->entry] = NULL;
	table_ids[req->entry] = 0;
	cpht_xacts_table_dropped(req->entry);
	cpht_table_destroy(t);
}

cpht_table *
cpht_worker_shared_table(int entry, uint64 table_id)
{
	if (entry < 0 || entry >= cpht_control->max_tables || table_ids[entry] != table_id)
		return NULL;
	return tables[entry];
}

void
cpht_worker_shared_install(int entry, uint64 table_id, cpht_table *t, bool transactional)
{
	tables[entry] = t;
	table_ids[entry] = table_id;
	cpht_xacts_table_created(entry, table_id, transactional);
	/* its statistics count from its restore */
	cpht_table_stats_init(&cpht_catalog[entry].stats, (uint64) GetCurrentTimestamp());
}

void
cpht_worker_shared_drop(int entry)
{
	cpht_table *t = tables[entry];

	cpht_durable_dropped(entry);
	LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
	cpht_catalog[entry].state = CPHT_ENTRY_FREE;
	LWLockRelease(cpht_control->catalog_lock);
	tables[entry] = NULL;
	table_ids[entry] = 0;
	cpht_xacts_table_dropped(entry);
	cpht_table_destroy(t);
}

void
cpht_worker_shared_lose(int entry, const char *reason)
{
	cpht_table *t = tables[entry];

	/* a durable table is gone for recovery too (durable_restore.c keeps the file
	 * of one it could not replay at start) */
	cpht_durable_dropped(entry);

	LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
	cpht_catalog[entry].state = CPHT_ENTRY_LOST;
	strlcpy(cpht_catalog[entry].lost_reason, reason, CPHT_TEXT_LEN);
	LWLockRelease(cpht_control->catalog_lock);
	tables[entry] = NULL;
	table_ids[entry] = 0;
	cpht_xacts_table_dropped(entry);
	cpht_table_destroy(t);
}

/*
 * A new owner for a shared table (the backend checked the roles).  A
 * durable table's snapshot file names its owner, and so does its CREATE
 * record: the change goes to WAL, flushed before the reply, and marks the
 * table changed, so that replay after a crash applies it and the next
 * round writes a file with the new owner (durable_requests.c).
 */
void
cpht_worker_op_alter_owner(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;

	(void) cpht_worker_request_table(req);
	if (!OidIsValid(req->owner))
		elog(ERROR, "cpht request gives no owner");
	/* giving a table away must not let it pass the new owner's cap */
	cpht_quota_check_owner_change(req->entry, req->owner, req->memory_cap_kb);
	cpht_durable_owner_changed(req->entry, req->owner);
	LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
	cpht_catalog[req->entry].owner = req->owner;
	LWLockRelease(cpht_control->catalog_lock);
}
