/*
 * db_drop.c — the shared tables of a database go with it, and with the
 * cpht extension in it (cpht in shared_preload_libraries).
 *
 * Shared tables live in the cpht worker, keyed by database OID.  An object
 * access hook sees DROP DATABASE (OAT_DROP on pg_database, WITH (FORCE)
 * too) and the drop of the cpht extension (OAT_DROP on pg_extension: DROP
 * EXTENSION, DROP SCHEMA ... CASCADE, DROP OWNED), however it was asked
 * for, and notes the database.  Only once the transaction has committed
 * does the backend tell the worker (CPHT_OP_DROP_DATABASE), which drops
 * every shared table of that database, durable ones for good (a DROP
 * record each, the snapshot file removed: worker/databases.c); the
 * statement returns after that.  A transaction that aborts, or a
 * subtransaction rolled back past the drop, tells nothing; one that would
 * be prepared is refused (the prepared drop would commit elsewhere).
 *
 * DROP DATABASE cannot run in a transaction block: it commits at once.
 * DROP EXTENSION can be rolled back, which is why nothing happens before
 * the commit.  Where no worker runs at the commit, the database is queued
 * in shared memory for the next worker (CphtControl.pending_drops); a
 * database dropped while the server ran without cpht preloaded, or before
 * a crash ended the cluster between the commit and the worker's drop, has
 * its tables dropped by the worker's sweep at start, which drops the
 * tables of databases that no longer exist.
 *
 * The commit callback never raises (the transaction has committed):
 * failures are WARNINGs.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"

#include "client/client.h"

/* Databases whose tables go when the transaction commits, with the
 * (sub)transaction nesting level that dropped them.  A transaction drops
 * one database or the extension of its own: a few entries are plenty. */
#define MAX_NOTED 8

typedef struct NotedDrop
{
	Oid			dboid;
	int			level;
} NotedDrop;

static NotedDrop noted[MAX_NOTED];
static int	nnoted = 0;

static object_access_hook_type prev_object_access_hook = NULL;

static void
note_drop(Oid dboid)
{
	int			level = GetCurrentTransactionNestLevel();

	/* a slot for the request at commit, taken now, where an ERROR is
	 * still allowed */
	cpht_client_attach();
	for (int i = 0; i < nnoted; i++)
		if (noted[i].dboid == dboid)
		{
			noted[i].level = Min(noted[i].level, level);
			return;
		}
	if (nnoted == MAX_NOTED)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many databases dropped with their shared cpht tables in one transaction"),
				 errdetail("One transaction can drop the shared cpht tables of at most %d databases.", MAX_NOTED)));
	noted[nnoted].dboid = dboid;
	noted[nnoted].level = level;
	nnoted++;
}

static void
cpht_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId,
				   void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access != OAT_DROP || subId != 0)
		return;
	if (classId == DatabaseRelationId)
		note_drop(objectId);
	else if (classId == ExtensionRelationId)
	{
		char	   *name = get_extension_name(objectId);

		if (name != NULL && strcmp(name, "cpht") == 0)
			note_drop(MyDatabaseId);
	}
}

/*
 * No worker to tell now: the next one drops the tables once it restored
 * the durable ones.  A full queue leaves them to the sweep at the next
 * start, which catches dropped databases but not a dropped extension.
 */
static void
queue_for_next_worker(Oid dboid)
{
	CphtControl *ctl = cpht_control;
	bool		queued = false;
	int			pid,
				procno;

	SpinLockAcquire(&ctl->mutex);
	for (int i = 0; i < ctl->npending_drops && !queued; i++)
		queued = ctl->pending_drops[i] == dboid;
	if (!queued && ctl->npending_drops < CPHT_PENDING_DROPS)
	{
		ctl->pending_drops[ctl->npending_drops++] = dboid;
		queued = true;
	}
	pid = ctl->worker_pid;
	procno = ctl->worker_pgprocno;
	SpinLockRelease(&ctl->mutex);
	if (pid != 0)
		SetLatch(&ProcGlobal->allProcs[procno].procLatch);
	if (!queued)
		ereport(WARNING,
				(errmsg("the shared cpht tables of database %u could not be dropped", dboid),
				 errdetail("No cpht worker could be told, and too many drops wait for one already."),
				 errhint("A dropped database's tables are dropped when the cpht worker next starts; drop the tables of a dropped extension with cpht_drop.")));
}

static void
tell_worker(Oid dboid)
{
	CphtReply  *rep = NULL;

	if (cpht_client_idle())
	{
		CphtRequest *req = cpht_client_request();

		req->op = CPHT_OP_DROP_DATABASE;
		req->dboid = dboid;
		rep = cpht_client_send_quiet();
	}
	if (rep == NULL)
		queue_for_next_worker(dboid);
	else if (rep->sqlerrcode != 0)
		ereport(WARNING,
				(errmsg("the cpht worker failed to drop the shared cpht tables of database %u: %s",
						dboid, rep->message)));
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
					 errmsg("cannot prepare a transaction that dropped the cpht extension"),
					 errdetail("The shared cpht tables of the database are dropped when the transaction that drops the extension commits in its session.")));
			break;
		case XACT_EVENT_COMMIT:
			{
				int			n = nnoted;

				nnoted = 0;
				for (int i = 0; i < n; i++)
					tell_worker(noted[i].dboid);
				break;
			}
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			nnoted = 0;
			break;
		default:
			break;
	}
}

/* A subtransaction rolled back takes its drops along; one that commits
 * hands them to its parent. */
static void
at_subxact_event(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	(void) mySubid;
	(void) parentSubid;
	(void) arg;
	cpht_noted_subxact_end(event, noted, &nnoted, sizeof(noted[0]), offsetof(NotedDrop, level));
}

void
cpht_db_drop_init(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = cpht_object_access;
	RegisterXactCallback(at_xact_event, NULL);
	RegisterSubXactCallback(at_subxact_event, NULL);
}
