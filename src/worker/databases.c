/*
 * databases.c — the cpht worker drops the shared tables of databases that
 * are gone, and of databases whose cpht extension was dropped.
 *
 * Shared tables are keyed by database OID.  A backend whose transaction
 * dropped a database or the cpht extension tells the worker once it has
 * committed (CPHT_OP_DROP_DATABASE, client/db_drop.c); the worker drops
 * every table of that database: a durable one as cpht_drop does (a DROP
 * record, flushed, and its snapshot file removed), so that neither a
 * restart nor a crash brings it back, and the snapshot files of that
 * database it could not restore, with a DROP record each too.
 *
 * A drop the worker serves before it restored the durable tables (right
 * after a restart of the worker), or one committed while no worker ran,
 * waits in CphtControl.pending_drops and is done once they are restored.
 *
 * Databases dropped while no worker could hear of it (the server ran
 * without cpht preloaded, a crash between the commit and the worker's
 * drop, tables an older cpht left behind) are found at each start of the
 * worker, after the durable tables are back: the worker reads pg_database
 * (it is connected to no database, which allows reading the shared
 * catalogs) and drops the tables and snapshot files of databases that no
 * longer exist, with a LOG line for each.
 */
#include "postgres.h"

#include <dirent.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "worker/durable.h"
#include "worker/worker_internal.h"

/*
 * Drops every shared table of database dboid and its snapshot files that
 * are not live tables; returns the number of tables.  orphan: the
 * database no longer exists (the sweep at start), each table is named in
 * the log.
 */
static int
drop_database(Oid dboid, bool orphan)
{
	CphtControl *ctl = cpht_control;
	int			dropped = 0;

	for (int i = 0; i < ctl->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];
		NameData	name;
		int			state;
		uint64		table_id;
		bool		durable;

		/* backends free lost entries (cpht_drop): read under the lock */
		LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
		state = e->state;
		if (e->dboid != dboid || state == CPHT_ENTRY_FREE || state == CPHT_ENTRY_CREATING)
		{
			LWLockRelease(ctl->catalog_lock);
			continue;
		}
		name = e->name;
		table_id = e->table_id;
		durable = e->durable;
		/* a lost table has nothing left but its name */
		if (state != CPHT_ENTRY_LIVE || cpht_worker_shared_table(i, table_id) == NULL)
			e->state = CPHT_ENTRY_FREE;
		LWLockRelease(ctl->catalog_lock);

		if (state == CPHT_ENTRY_LIVE && cpht_worker_shared_table(i, table_id) != NULL)
			cpht_worker_shared_drop(i);
		dropped++;
		if (orphan)
			ereport(LOG,
					(errmsg("cpht worker dropped shared table \"%s\" of database %u, which no longer exists",
							NameStr(name), dboid),
					 durable ? errdetail("The table was durable; its snapshot file is removed.") : 0));
	}
	(void) cpht_durable_drop_files(dboid);
	return dropped;
}

/* Databases the worker must drop once it restored the durable tables. */
static void
queue_drop(Oid dboid)
{
	CphtControl *ctl = cpht_control;
	bool		queued = false;

	SpinLockAcquire(&ctl->mutex);
	for (int i = 0; i < ctl->npending_drops && !queued; i++)
		queued = ctl->pending_drops[i] == dboid;
	if (!queued && ctl->npending_drops < CPHT_PENDING_DROPS)
	{
		ctl->pending_drops[ctl->npending_drops++] = dboid;
		queued = true;
	}
	SpinLockRelease(&ctl->mutex);
	if (!queued)
		ereport(WARNING,
				(errmsg("cpht worker cannot note the drop of the shared tables of database %u for after the restore of durable tables", dboid),
				 errdetail("Too many drops wait already.")));
}

void
cpht_worker_op_drop_database(CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;
	int			dropped;

	if (!OidIsValid(req->dboid))
		elog(ERROR, "cpht request to drop the tables of database 0");
	/*
	 * While the restore runs (the worker serves requests meanwhile), the
	 * drop waits for it whole: dropping files the restore has not reached
	 * yet would leave them failed, their WAL kept for ever.
	 */
	if (cpht_durable_restoring())
	{
		queue_drop(req->dboid);
		slot->rep.value = 0;
		return;
	}
	dropped = drop_database(req->dboid, false);
	/* durable tables still to be restored go when they are back */
	if (pg_atomic_read_u32(&cpht_control->durable_ready) == 0)
		queue_drop(req->dboid);
	if (dropped > 0)
		ereport(LOG,
				(errmsg("cpht worker dropped %d shared tables of database %u with the database or its cpht extension",
						dropped, req->dboid)));
	slot->rep.value = (uint64) dropped;
}

void
cpht_worker_drop_pending(void)
{
	CphtControl *ctl = cpht_control;

	for (;;)
	{
		Oid			dboid = InvalidOid;
		int			dropped;

		SpinLockAcquire(&ctl->mutex);
		if (ctl->npending_drops > 0)
			dboid = ctl->pending_drops[--ctl->npending_drops];
		SpinLockRelease(&ctl->mutex);
		if (!OidIsValid(dboid))
			return;
		dropped = drop_database(dboid, false);
		if (dropped > 0)
			ereport(LOG,
					(errmsg("cpht worker dropped %d shared tables of database %u with the database or its cpht extension",
							dropped, dboid)));
	}
}

static bool
oid_in(Oid oid, const Oid *oids, int n)
{
	for (int i = 0; i < n; i++)
		if (oids[i] == oid)
			return true;
	return false;
}

/*
 * The OIDs of the existing databases (pg_database, a shared catalog), in
 * a transaction of the worker's own; false with a LOG when it cannot be
 * read: then nothing is dropped.
 */
static bool
existing_databases(Oid **oids, int *n)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = true;
	int			max = 64;

	*n = 0;
	*oids = palloc(sizeof(Oid) * max);
	PG_TRY();
	{
		Relation	rel;
		TableScanDesc scan;
		HeapTuple	tup;

		StartTransactionCommand();
		(void) GetTransactionSnapshot();
		rel = table_open(DatabaseRelationId, AccessShareLock);
		scan = table_beginscan_catalog(rel, 0, NULL);
		while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
		{
			if (*n == max)
			{
				MemoryContext old = MemoryContextSwitchTo(cxt);

				max *= 2;
				*oids = repalloc(*oids, sizeof(Oid) * max);
				MemoryContextSwitchTo(old);
			}
			(*oids)[(*n)++] = ((Form_pg_database) GETSTRUCT(tup))->oid;
		}
		table_endscan(scan);
		table_close(rel, AccessShareLock);
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ereport(LOG,
				(errmsg("cpht worker could not read pg_database to drop the shared tables of dropped databases: %s",
						ed->message)));
		FreeErrorData(ed);
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	return ok;
}

/* The databases that existed when the worker last read pg_database
 * (TopMemoryContext); none read yet, or it could not be read. */
static Oid *existing = NULL;
static int	nexisting = 0;

/*
 * Reads the existing databases for cpht_worker_drop_orphans, once, before
 * the worker restores the durable tables and holds checkpoints
 * (durable_hold.c: its transaction must come first).  No database is
 * created with shared tables, nor dropped unseen, before that sweep: the
 * worker serves no request in between, and a drop that comes later is
 * sent to the worker (cpht_worker_drop_pending).
 */
void
cpht_worker_read_databases(void)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	Oid		   *oids;
	int			n;

	if (existing_databases(&oids, &n))
	{
		existing = oids;
		nexisting = n;
	}
	MemoryContextSwitchTo(old);
}

void
cpht_worker_drop_orphans(void)
{
	CphtControl *ctl = cpht_control;
	Oid		   *exist = existing;
	int			nexist = nexisting;
	Oid		   *gone;
	int			ngone = 0,
				maxgone = 16;
	DIR		   *dir;
	struct dirent *de;

	if (exist == NULL)
		return;
	gone = palloc(sizeof(Oid) * maxgone);
	/* the databases of shared tables and of snapshot files */
	LWLockAcquire(ctl->catalog_lock, LW_SHARED);
	for (int i = 0; i < ctl->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];

		if ((e->state == CPHT_ENTRY_LIVE || e->state == CPHT_ENTRY_LOST) &&
			!oid_in(e->dboid, exist, nexist) && !oid_in(e->dboid, gone, ngone))
		{
			if (ngone == maxgone)
			{
				maxgone *= 2;
				gone = repalloc(gone, sizeof(Oid) * maxgone);
			}
			gone[ngone++] = e->dboid;
		}
	}
	LWLockRelease(ctl->catalog_lock);
	dir = AllocateDir(CPHT_SNAPSHOT_DIR);
	while ((de = ReadDir(dir, CPHT_SNAPSHOT_DIR)) != NULL)
	{
		Oid			db;

		if (sscanf(de->d_name, "%u_", &db) != 1 || strstr(de->d_name, ".snap") == NULL ||
			oid_in(db, exist, nexist) || oid_in(db, gone, ngone))
			continue;
		if (ngone == maxgone)
		{
			maxgone *= 2;
			gone = repalloc(gone, sizeof(Oid) * maxgone);
		}
		gone[ngone++] = db;
	}
	FreeDir(dir);

	for (int i = 0; i < ngone; i++)
		(void) drop_database(gone[i], true);
	pfree(gone);
	pfree(existing);
	existing = NULL;
	nexisting = 0;
}
