/*
 * durable_requests.c — what requests do to durable shared tables: the
 * CREATE record and first snapshot of a new table (or its .pending file
 * while its creation is open), its first file once that committed, the
 * DROP record and its file removed, the files of a dropped database, the
 * keys of a call that changed one written to WAL before its reply, and a
 * change of owner.
 *
 * Invariants (durable.c gives the design): a call's keys are in WAL, in
 * the order the table changed, before its reply; a table's file is
 * written only after WAL is flushed up to its position; the catalog
 * forgets a dropped table before its file goes.  The worker alone runs
 * this, one request at a time.
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/slru.h"
#include "access/transam.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xlogreader.h"
#include "access/xlogutils.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "replication/slot.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/standby.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "worker/durable.h"
#include "worker/durable_internal.h"
#include "worker/worker_internal.h"
#include "worker/xacts.h"

static void remove_pending_file(int entry);

static void
check_durable_possible(void)
{
	const char *problem;

	if (!restored)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable shared cpht tables cannot be created yet"),
				 errdetail("The cpht worker restores the durable tables once the server has ended recovery; a standby creates none.")));
	/* the slot exists while a durable table does, from before its CREATE
	 * record on */
	if (!durable_slot_ready(NULL) || SearchNamedReplicationSlot(SLOT_NAME, true) == NULL)
		durable_ensure_slot();
	if (!durable_slot_ready(&problem))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable shared cpht tables need a replication slot"),
				 errdetail("The cpht worker could not create replication slot \"%s\": %s.", SLOT_NAME, problem),
				 errhint("Set wal_level to replica or logical and max_replication_slots above the slots in use, and restart the server.")));
}

void
cpht_durable_created(int entry, cpht_table *t, const cpht_params *params)
{
	CphtCatalogEntry *e = &cpht_catalog[entry];
	MemoryContext cxt = CurrentMemoryContext;
	XLogRecPtr	lsn;

	check_durable_possible();
	lsn = GetXLogInsertRecPtr();
	e->create_lsn = cpht_wal_create(e, params);
	e->durable = true;
	/*
	 * Created inside a transaction block: no file and no catalog line
	 * until the creation commits (cpht_durable_create_committed); the WAL
	 * from its CREATE record on is kept meanwhile (ddl_xact.c in the
	 * backend says why).
	 */
	if (TransactionIdIsValid(e->create_xid))
	{
		XLogFlush(e->create_lsn);
		durable_forget(entry);
		durable[entry].live = true;
		durable[entry].pending = true;
		durable[entry].snapshot_lsn = InvalidXLogRecPtr;
		durable[entry].current_lsn = lsn;
		durable[entry].changed = true;
		durable[entry].first_change = lsn;
		return;
	}
	lsn = GetXLogInsertRecPtr();
	durable_flush_inserted(lsn);
	PG_TRY();
	{
		cpht_snapshot_write(entry, e, t, lsn, InvalidTransactionId);
	}
	PG_CATCH();
	{
		/* the table is not created after all, for recovery neither */
		MemoryContextSwitchTo(cxt);
		XLogFlush(cpht_wal_drop(e->create_lsn));
		e->durable = false;
		PG_RE_THROW();
	}
	PG_END_TRY();
	durable[entry].live = true;
	durable_snapshot_written(entry, lsn);
	/* a file of an earlier table of that name is no longer reported */
	for (int i = 0; i < nfailed; i++)
		if (failed[i].named && failed[i].dboid == e->dboid &&
			strcmp(NameStr(failed[i].name), NameStr(e->name)) == 0)
		{
			failed[i].named = false;
			failed[i].keep_lsn = InvalidXLogRecPtr;
		}
	durable_write_catalog_or_log();
}

/*
 * The first snapshot file of a table created inside a transaction block
 * whose creation committed, and its catalog line: as at the creation of
 * any other durable table.  On failure (a LOG) the table stays pending and
 * its WAL kept, and the next round tries again.
 */
void
durable_write_first_snapshot(int entry)
{
	CphtCatalogEntry *e = &cpht_catalog[entry];
	cpht_table *t = cpht_worker_shared_table(entry, e->table_id);
	MemoryContext cxt = CurrentMemoryContext;
	XLogRecPtr	lsn = GetXLogInsertRecPtr();

	if (t == NULL || !durable[entry].pending || TransactionIdIsValid(e->create_xid))
		return;
	PG_TRY();
	{
		durable_flush_inserted(lsn);
		cpht_snapshot_write(entry, e, t, lsn, InvalidTransactionId);
		durable[entry].pending = false;
		durable_snapshot_written(entry, lsn);
		durable[entry].prior_until = InvalidXLogRecPtr;
		/* the .snap is there: a restore ignores the .pending file now */
		remove_pending_file(entry);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		return;
	}
	PG_END_TRY();
	durable_write_catalog_or_log();
}

/*
 * The .pending file of a table whose creation is still open, at the
 * round's position lsn (flushed): the table with the changes it keeps of
 * open transactions, its creation's among them.  A copy of the data
 * directory made now (a base backup waits for this round) has WAL only
 * from after the CREATE record; it restores this file if, and only if,
 * the creation committed (durable_restore.c).  The WAL from the CREATE
 * record on stays kept, as for every pending table.  On failure a LOG,
 * and the next round tries again.
 */
void
durable_write_pending_file(int entry, XLogRecPtr lsn)
{
	CphtCatalogEntry *e = &cpht_catalog[entry];
	cpht_table *t = cpht_worker_shared_table(entry, e->table_id);
	MemoryContext cxt = CurrentMemoryContext;

	if (t == NULL || !TransactionIdIsValid(e->create_xid))
		return;
	PG_TRY();
	{
		cpht_snapshot_write(entry, e, t, lsn, e->create_xid);
		durable[entry].pending_xid = e->create_xid;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
	}
	PG_END_TRY();
}

/* A pending table's .pending file goes (its .snap was written, or the
 * table was dropped). */
static void
remove_pending_file(int entry)
{
	char		path[MAXPGPATH];

	if (!TransactionIdIsValid(durable[entry].pending_xid))
		return;
	cpht_snapshot_pending_path(path, sizeof(path), cpht_catalog[entry].dboid,
							   cpht_catalog[entry].create_lsn, durable[entry].pending_xid);
	(void) durable_unlink(path, LOG);
	durable[entry].pending_xid = InvalidTransactionId;
}

void
cpht_durable_create_committed(int entry)
{
	if (!cpht_catalog[entry].durable || !durable[entry].live)
		return;
	durable_write_first_snapshot(entry);
}

void
cpht_durable_dropped(int entry)
{
	CphtCatalogEntry *e = &cpht_catalog[entry];
	char		path[MAXPGPATH];
	bool		had_file;

	if (!e->durable)
		return;
	/*
	 * A table durable_restore_all could not replay is lost for now, but its file
	 * and WAL stay for the next start; any other drop or loss is for good.
	 */
	if (restoring)
	{
		/* the catalog keeps naming it */
		durable_add_failed(e->dboid, NameStr(e->name), e->create_lsn, InvalidXLogRecPtr,
				   durable[entry].snapshot_lsn);
		e->durable = false;
		durable_forget(entry);
		return;
	}
	XLogFlush(cpht_wal_drop(e->create_lsn));
	e->durable = false;
	had_file = !durable[entry].pending;
	/* after the DROP record, which a restore that still finds the file
	 * replays after it */
	remove_pending_file(entry);
	durable_forget(entry);
	/*
	 * The catalog forgets it before its file goes: a crash in between
	 * leaves a file that the next start restores and the DROP record
	 * drops.  The slot goes with the last table.
	 */
	if (restored)
	{
		durable_write_catalog_or_log();
		if (!durable_wal_needed())
			durable_drop_slot();
	}
	/* one whose creation never committed has none */
	if (!had_file)
		return;
	cpht_snapshot_path(path, sizeof(path), e->dboid, e->create_lsn);
	(void) durable_unlink(path, LOG);
}

/*
 * The snapshot files of database dboid whose table is not live (files that
 * could not be restored; the live tables of the database were dropped
 * before): each gets a DROP record, so that replay does not create its
 * table again from its CREATE record, then the file goes and its WAL is
 * no longer kept.  Returns how many.
 */
int
cpht_durable_drop_files(Oid dboid)
{
	DIR		   *dir;
	struct dirent *de;
	int			removed = 0;

	dir = AllocateDir(CPHT_SNAPSHOT_DIR);
	while ((de = ReadDir(dir, CPHT_SNAPSHOT_DIR)) != NULL)
	{
		char		path[MAXPGPATH];
		Oid			db;
		uint32		hi,
					lo;
		XLogRecPtr	create_lsn;
		char		end;

		if (sscanf(de->d_name, "%u_%08X%08X.snap%c", &db, &hi, &lo, &end) != 3 || db != dboid)
			continue;
		create_lsn = ((uint64) hi << 32) | lo;
		if (durable_entry(create_lsn) >= 0)
			continue;
		XLogFlush(cpht_wal_drop(create_lsn));
		snprintf(path, sizeof(path), "%s/%s", CPHT_SNAPSHOT_DIR, de->d_name);
		(void) durable_unlink(path, LOG);
		for (int i = 0; i < nfailed; i++)
			if (failed[i].create_lsn == create_lsn)
				failed[i--] = failed[--nfailed];
		ereport(LOG,
				(errmsg("cpht worker removed snapshot file \"%s\" of database %u", path, dboid)));
		removed++;
	}
	FreeDir(dir);
	return removed;
}

cpht_status
cpht_durable_log_call(const CphtRequest *req, cpht_table *t, uint64 position, CphtReply *rep)
{
	CphtCatalogEntry *e;
	uint64		m = cpht_table_log_position(t) - position;
	uint64	   *keys;
	uint8	   *where;
	uint64		start = 0;
	TransactionId xid;
	cpht_status st;

	if (req->private_table || m == 0)
		return CPHT_OK;
	e = &cpht_catalog[req->entry];
	if (!e->durable)
		return CPHT_OK;
	keys = malloc(m * sizeof(uint64));
	where = malloc(m);
	if (keys == NULL || where == NULL)
	{
		free(keys);
		free(where);
		return CPHT_ERR_NOMEM;
	}
	st = cpht_table_log_read(t, position, m, keys, where);
	if (st != CPHT_OK)
	{
		free(keys);
		free(where);
		return st;
	}
	xid = e->transactional ? req->sub_xid : InvalidTransactionId;
	/* its file is exact before this (write_exact) */
	if (!durable[req->entry].changed)
		durable[req->entry].first_change = GetXLogInsertRecPtr();
	/* runs of inserted or of deleted keys, in the order they happened */
	for (uint64 i = 1; i <= m; i++)
	{
		if (i == m || (where[i] != 0) != (where[start] != 0))
		{
			uint64		n = i - start;
			uint64	   *run = keys + start;

			rep->wal_end = cpht_wal_keys(where[start] != 0 ? XLOG_CPHT_ERASE : XLOG_CPHT_PUT,
										 e->create_lsn, xid, run, n);
			start = i;
		}
	}
	free(keys);
	free(where);
	durable[req->entry].changed = true;
	if (TransactionIdIsValid(xid) &&
		(!TransactionIdIsValid(durable[req->entry].oldest_xid) ||
		 TransactionIdPrecedes(xid, durable[req->entry].oldest_xid)))
		durable[req->entry].oldest_xid = xid;
	return CPHT_OK;
}

/*
 * The owner is in the table's snapshot file (and its CREATE record): the
 * change is logged, flushed before the reply as the creation is, and the
 * table counts as changed from there, so that its retention point stays
 * before the record (replay after a crash applies it) until the next
 * round writes a file that names the new owner.
 */
void
cpht_durable_owner_changed(int entry, Oid owner)
{
	CphtCatalogEntry *e = &cpht_catalog[entry];

	if (!e->durable || !durable[entry].live)
		return;
	if (!durable[entry].changed)
		durable[entry].first_change = GetXLogInsertRecPtr();
	XLogFlush(cpht_wal_owner(e->create_lsn, owner));
	durable[entry].changed = true;
}
