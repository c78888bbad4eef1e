/*
 * durable_rounds.c — durable shared tables while the worker runs: the
 * catalog file, snapshot rounds and their EXACT records (and a standby's
 * rounds), CHECKPOINT, the save at a clean shutdown, and when the next
 * round is due.  The slot is durable_slot.c's, the records of requests
 * durable_requests.c's.
 *
 * Invariants (durable.c gives the design): a table's snapshot is written
 * only after WAL is flushed up to its position; the catalog with the new
 * retention points is on disk before the slot lets WAL go.  The worker
 * alone runs this, one request or round at a time: the state of
 * durable_internal.h needs no lock.
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

static TimestampTz last_round = 0;
static XLogRecPtr last_round_lsn = InvalidXLogRecPtr;
static XLogRecPtr last_round_redo = InvalidXLogRecPtr;
static XLogRecPtr failed_round_redo = InvalidXLogRecPtr;	/* a round that failed */
static TimestampTz last_resolve_check = 0;

/* Rounds: every table, the changed ones, or only those whose file keeps
 * changes of transactions that ended or records' xids near truncation. */
typedef enum RoundMode
{
	ROUND_ALL,
	ROUND_CHANGED,
	ROUND_RESOLVE
} RoundMode;

/* ---- the catalog file ------------------------------------------------------- */

/* Whether a live durable table of this database has this name. */
static bool
name_live(Oid dboid, const NameData *name)
{
	for (int i = 0; i < cpht_control->max_tables; i++)
		if (durable[i].live && cpht_catalog[i].dboid == dboid &&
			strcmp(NameStr(cpht_catalog[i].name), NameStr(*name)) == 0)
			return true;
	return false;
}

/*
 * Writes pg_cpht/catalog: every live durable table with its retention
 * point, and every file that could not be restored and whose name no live
 * table took, so that the next start names them again.  ERROR on failure.
 */
static void
write_catalog(bool clean, XLogRecPtr at)
{
	CphtCatalogRecord *recs = palloc0(sizeof(CphtCatalogRecord) * (cpht_control->max_tables + nfailed + 1));
	int			n = 0;

	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];

		/* a pending table has no file: its CREATE record names it */
		if (!durable[i].live || durable[i].pending)
			continue;
		recs[n].dboid = e->dboid;
		recs[n].name = e->name;
		recs[n].create_lsn = e->create_lsn;
		recs[n].file_lsn = durable[i].snapshot_lsn;
		recs[n].current_lsn = durable[i].current_lsn;
		n++;
	}
	for (int i = 0; i < nfailed; i++)
	{
		if (!failed[i].named || name_live(failed[i].dboid, &failed[i].name))
			continue;
		recs[n].dboid = failed[i].dboid;
		recs[n].lost = 1;
		recs[n].name = failed[i].name;
		recs[n].create_lsn = failed[i].create_lsn;
		recs[n].file_lsn = failed[i].file_lsn;
		recs[n].current_lsn = failed[i].keep_lsn;
		n++;
	}
	cpht_catalog_file_write(recs, n, clean, at);
	durable_catalog_written();
	pfree(recs);
}

/* write_catalog where a failure must not undo what was done: a LOG, and
 * the next round writes it again. */
void
durable_write_catalog_or_log(void)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		write_catalog(false, GetXLogInsertRecPtr());
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
	}
	PG_END_TRY();
}

/* ---- snapshot rounds -------------------------------------------------------- */

/* Whether any durable table, or a file that did not fit, needs WAL. */
bool
durable_wal_needed(void)
{
	for (int i = 0; i < cpht_control->max_tables; i++)
		if (durable[i].live)
			return true;
	for (int i = 0; i < nfailed; i++)
		if (!XLogRecPtrIsInvalid(failed[i].keep_lsn))
			return true;
	return false;
}

static void
collect_saved(void *arg, TransactionId subxid, const uint64 *keys, const uint8 *where, uint64 n)
{
	DurableState *d = arg;

	(void) keys;
	(void) where;
	(void) n;
	if (d->nsaved > 0 && d->saved[d->nsaved - 1] == subxid)
		return;
	d->saved = d->saved ? repalloc(d->saved, sizeof(TransactionId) * (d->nsaved + 1))
		: MemoryContextAlloc(TopMemoryContext, sizeof(TransactionId));
	d->saved[d->nsaved++] = subxid;
}

/* A snapshot of table i was written at lsn. */
void
durable_snapshot_written(int i, XLogRecPtr lsn)
{
	DurableState *d = &durable[i];

	/* for write_exact: the file replaced was exact up to its first change */
	d->prior_snapshot = d->snapshot_lsn;
	d->prior_until = d->changed ? d->first_change : InvalidXLogRecPtr;
	d->first_change = InvalidXLogRecPtr;
	d->snapshot_lsn = lsn;
	d->current_lsn = lsn;
	d->changed = false;
	/* cpht_stat_tables: the last snapshot of the table, and when */
	pg_atomic_write_u64(&cpht_catalog[i].stats.snapshot_lsn, lsn);
	pg_atomic_write_u64(&cpht_catalog[i].stats.snapshot_time, (uint64) GetCurrentTimestamp());
	d->oldest_xid = InvalidTransactionId;
	if (d->saved != NULL)
		pfree(d->saved);
	d->saved = NULL;
	d->nsaved = 0;
	cpht_xacts_each_segment(i, collect_saved, d);
}

/*
 * Whether PostgreSQL may soon drop the pg_xact status of xid: it truncates
 * pg_xact by segments, only below the oldest frozen xid, which never
 * passes the next xid; so once the next xid comes within a quarter of a
 * segment of the end of xid's segment, a new snapshot must no longer need
 * it.
 */
static bool
xid_near_truncation(TransactionId xid)
{
	uint32		per_segment = (uint32) BLCKSZ * 4 * SLRU_PAGES_PER_SEGMENT;
	uint32		segment_end = (xid / per_segment + 1) * per_segment;
	TransactionId next = XidFromFullTransactionId(ReadNextFullTransactionId());

	return (int32) (next - (segment_end - per_segment / 4)) >= 0;
}

/*
 * Whether table i's file, or its replay, depends on the outcome of a
 * transaction that a new snapshot would settle: one whose changes the
 * file keeps and that has ended (the new snapshot has its outcome in the
 * table and keeps no changes of it), or a record's xid that pg_xact may
 * soon drop.
 */
static bool
needs_resolve(int i)
{
	DurableState *d = &durable[i];

	if (TransactionIdIsValid(d->oldest_xid) && xid_near_truncation(d->oldest_xid))
		return true;
	for (int k = 0; k < d->nsaved; k++)
		if (!TransactionIdIsInProgress(d->saved[k]))
			return true;
	return false;
}

/*
 * After a round: an EXACT record naming every durable table unchanged
 * since its file, flushed (nothing was written to WAL since the round's
 * position, so each such file is exact at this record), and, for a table
 * changed since its file (or whose file the round just replaced), that
 * file with the position of its first change, up to which it was exact.  A base backup copies
 * pg_cpht/ but holds WAL only from its start checkpoint on; a round after
 * that checkpoint (every checkpoint brings one, round_due) leaves a record
 * in the backup's WAL that lets its worker replay such a file from there.
 */
static void
write_exact(void)
{
	/* up to two entries a table: its file, and the one it replaced */
	xl_cpht_exact_table *tables = palloc(sizeof(xl_cpht_exact_table) * Max(cpht_control->max_tables, 1) * 2);
	uint32		n = 0;

	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		DurableState *d = &durable[i];

		if (!d->live || d->pending)
			continue;
		/* a file just replaced, or one changed since: exact up to the change */
		if (!XLogRecPtrIsInvalid(d->prior_until) || (d->changed && !XLogRecPtrIsInvalid(d->first_change)))
		{
			tables[n].table = cpht_catalog[i].create_lsn;
			tables[n].snapshot_lsn = d->changed ? d->snapshot_lsn : d->prior_snapshot;
			tables[n].until = d->changed ? d->first_change : d->prior_until;
			n++;
		}
		d->prior_until = InvalidXLogRecPtr;
		if (d->changed)
			continue;
		tables[n].table = cpht_catalog[i].create_lsn;
		tables[n].snapshot_lsn = d->snapshot_lsn;
		tables[n].until = InvalidXLogRecPtr;
		n++;
	}
	if (n > 0)
		XLogFlush(cpht_wal_exact(tables, n));
	pfree(tables);
}


static int
snapshot_round(RoundMode mode, bool clean)
{
	XLogRecPtr	redo = GetRedoRecPtr();
	XLogRecPtr	lsn = GetXLogInsertRecPtr();
	XLogRecPtr	keep = lsn;
	int			written = 0;

	if (!restored)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable shared cpht tables are not restored yet"),
				 errdetail("The cpht worker restores them once the server has ended recovery.")));
	/*
	 * Every change of the tables up to now, and every commit the worker
	 * was told of, is in WAL before lsn: flushed, a crash keeps it, so
	 * nothing in the files is newer than what recovery knows.
	 */
	durable_flush_inserted(lsn);
	/* the worker's row of pg_stat_activity; a request that asked for the
	 * round (cpht_checkpoint) reports idle when it is answered */
	if (cpht_worker_serving() < 0)
		pgstat_report_activity(STATE_RUNNING, "cpht: snapshot round of durable tables");
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];
		cpht_table *t;
		bool		write;

		if (!durable[i].live)
			continue;
		t = cpht_worker_shared_table(i, e->table_id);
		if (t == NULL)
			continue;
		/* its .pending file while its creation is open; then its first one */
		if (durable[i].pending)
		{
			durable_write_first_snapshot(i);
			if (durable[i].pending)
				durable_write_pending_file(i, lsn);
			keep = Min(keep, durable[i].current_lsn);
			continue;
		}
		if (mode == ROUND_ALL)
			write = true;
		else if (mode == ROUND_CHANGED && durable[i].changed)
			write = true;
		else
			write = needs_resolve(i);
		if (write)
		{
			cpht_snapshot_write(i, e, t, lsn, InvalidTransactionId);
			durable_snapshot_written(i, lsn);
			written++;
		}
		else if (!durable[i].changed)
		{
			/* no record of it since its file: the file is exact at lsn */
			durable[i].current_lsn = lsn;
		}
		keep = Min(keep, durable[i].current_lsn);
		/* cpht_stat_tables: the WAL this table keeps starts here */
		pg_atomic_write_u64(&e->stats.wal_keep_lsn, durable[i].current_lsn);
	}
	for (int i = 0; i < nfailed; i++)
		if (!XLogRecPtrIsInvalid(failed[i].keep_lsn))
			keep = Min(keep, failed[i].keep_lsn);
	/* the retention points are on disk before the slot lets WAL go */
	write_catalog(clean, lsn);
	write_exact();
	if (durable_wal_needed())
		durable_advance_slot(keep);
	else
		durable_drop_slot();
	if (cpht_worker_serving() < 0)
		pgstat_report_activity(STATE_IDLE, NULL);
	if (mode != ROUND_RESOLVE)
	{
		last_round = GetCurrentTimestamp();
		last_round_lsn = lsn;
		last_round_redo = redo;
	}
	return written;
}

int
cpht_durable_checkpoint(bool only_changed)
{
	/* a standby's files follow its replay (cpht_checkpoint() there) */
	if (RecoveryInProgress())
		return durable_standby_roll();
	return snapshot_round(only_changed ? ROUND_CHANGED : ROUND_ALL, false);
}

/* ---- a standby's rounds ------------------------------------------------------ */

/*
 * On a standby (durable_standby.c): the slot exists, made now if missing.
 * Made in recovery, it keeps WAL from the redo position of the last
 * restartpoint on, or of the checkpoint recovery started from (a base
 * backup's start), which is where the WAL of a new standby begins: the
 * restore that follows reads nothing older.  False (a LOG says why) when
 * no slot can be made.
 */
bool
durable_standby_keep_wal(void)
{
	durable_ensure_slot();
	return durable_slot_ready(NULL);
}

/*
 * A standby's round, after a replay that read WAL up to "at": each table
 * holds every record of it before its replayed_lsn whose transaction
 * committed and no other ("at", unless it stopped at a transaction not
 * ended there), so a changed table gets a file at that position and an
 * unchanged one's file is exact there; the catalog says so; then the slot
 * lets go the WAL before the oldest of those positions and of a CREATE
 * left for later.  A standby writes no WAL: no EXACT record, and its
 * restartpoints do not wait for the round.  Returns how many files it
 * wrote; ERROR (the caller logs it) leaves the files written so far, and
 * their tables' positions, in place.
 */
int
durable_standby_round(XLogRecPtr at)
{
	XLogRecPtr	keep = at;
	int			written = 0;

	if (cpht_worker_serving() < 0)
		pgstat_report_activity(STATE_RUNNING, "cpht: standby round of durable tables");
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];
		cpht_table *t;
		XLogRecPtr	pos;

		if (!durable[i].live)
			continue;
		t = cpht_worker_shared_table(i, e->table_id);
		if (t == NULL)
			continue;
		pos = XLogRecPtrIsInvalid(durable[i].replayed_lsn) ? at : durable[i].replayed_lsn;
		if (durable[i].changed)
		{
			cpht_snapshot_write(i, e, t, pos, InvalidTransactionId);
			durable_snapshot_written(i, pos);
			written++;
		}
		else if (pos > durable[i].current_lsn)
			durable[i].current_lsn = pos;
		keep = Min(keep, durable[i].current_lsn);
		pg_atomic_write_u64(&e->stats.wal_keep_lsn, durable[i].current_lsn);
	}
	for (int i = 0; i < nfailed; i++)
		if (!XLogRecPtrIsInvalid(failed[i].keep_lsn))
			keep = Min(keep, failed[i].keep_lsn);
	if (!XLogRecPtrIsInvalid(durable_replay_create_stop()))
		keep = Min(keep, durable_replay_create_stop());
	write_catalog(false, at);
	/* kept while the server is a standby, tables or not: a CREATE record
	 * may come at any time, and the next round reads from "at" on */
	durable_advance_slot(keep);
	if (cpht_worker_serving() < 0)
		pgstat_report_activity(STATE_IDLE, NULL);
	last_round = GetCurrentTimestamp();
	last_round_lsn = at;
	return written;
}

/* The time and position of the last round (a standby's included). */
void
durable_last_round(TimestampTz *when, XLogRecPtr *lsn)
{
	*when = last_round;
	*lsn = last_round_lsn;
}

void
cpht_durable_shutdown(void)
{
	MemoryContext cxt = CurrentMemoryContext;

	if (!restored)
		return;
	PG_TRY();
	{
		/* the worker writes nothing after this: every file is exact here */
		int			n = snapshot_round(ROUND_CHANGED, true);

		if (n > 0)
			ereport(LOG, (errmsg("cpht worker saved %d durable shared tables", n)));
		durable_hold_stop();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		ereport(LOG,
				(errmsg("cpht worker could not save every durable shared table at shutdown"),
				 errdetail("Their changes are in WAL: the next start replays them.")));
	}
	PG_END_TRY();
}

/* Whether some table's file keeps changes of transactions (checked for
 * their end about every second). */
static bool
any_saved(void)
{
	for (int i = 0; i < cpht_control->max_tables; i++)
		if (durable[i].live && (durable[i].nsaved > 0 || TransactionIdIsValid(durable[i].oldest_xid)))
			return true;
	return false;
}

long
cpht_durable_timeout(void)
{
	long		ms = 10000;

	if (!restored)
		return 1000;
	if (any_saved())
		ms = 1000;
	/* a new checkpoint (a base backup's start) brings a round soon */
	if (durable_wal_needed())
		ms = Min(ms, 200);
	if (cpht_snapshot_interval > 0)
	{
		TimestampTz due = TimestampTzPlusMilliseconds(last_round, (int64) cpht_snapshot_interval * 1000);
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), due);

		ms = Min(ms, Max(left, 1));
	}
	return ms;
}

static bool
round_due(void)
{
	/* a checkpoint since the last round: see write_exact */
	if (durable_wal_needed() && GetRedoRecPtr() != last_round_redo)
		return true;
	if (cpht_snapshot_interval > 0 &&
		TimestampDifferenceExceeds(last_round, GetCurrentTimestamp(), cpht_snapshot_interval * 1000))
		return true;
	return cpht_snapshot_wal > 0 &&
		GetXLogInsertRecPtr() - last_round_lsn >= (uint64) cpht_snapshot_wal * 1024 * 1024;
}

/* Whether a table needs a new snapshot to settle transactions (looked at
 * once a second at most). */
static bool
resolve_due(void)
{
	TimestampTz now = GetCurrentTimestamp();

	if (!TimestampDifferenceExceeds(last_resolve_check, now, 1000) || !any_saved())
		return false;
	last_resolve_check = now;
	for (int i = 0; i < cpht_control->max_tables; i++)
		if (durable[i].live && needs_resolve(i))
			return true;
	return false;
}

/* The periodic rounds count from now (the restore has just ended). */
void
durable_rounds_start(void)
{
	last_round = GetCurrentTimestamp();
	last_round_lsn = GetXLogInsertRecPtr();
}

/* A round when one is due (cpht.snapshot_interval, cpht.snapshot_wal, a
 * checkpoint since the last one) or a table needs a new snapshot to settle
 * transactions; an ERROR is logged, and the next round waits. */
void
durable_round_if_due(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	RoundMode	mode = ROUND_CHANGED;
	XLogRecPtr	redo = GetRedoRecPtr();
	bool		due = true;

	if (round_due())
	{
		mode = ROUND_CHANGED;
		if (cpht_debug_round_delay > 0 && redo != last_round_redo)
			(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, cpht_debug_round_delay,
							 PG_WAIT_EXTENSION);
	}
	else if (resolve_due())
		mode = ROUND_RESOLVE;
	else
		due = false;
	if (due)
	{
		PG_TRY();
		{
			(void) snapshot_round(mode, false);
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(cxt);
			EmitErrorReport();
			FlushErrorState();
			/* not again at once */
			last_round = GetCurrentTimestamp();
			last_round_lsn = GetXLogInsertRecPtr();
			if (redo != last_round_redo)
			{
				/* a checkpoint waiting for this round goes on without it */
				failed_round_redo = redo;
				ereport(LOG,
						(errmsg("cpht worker lets a checkpoint complete without the snapshot round after it"),
						 errdetail("A base backup started by this checkpoint may lack durable shared tables changed since their last snapshot.")));
			}
		}
		PG_END_TRY();
	}
	/*
	 * Checkpoints wait while the worker holds durable tables, until the
	 * round after their redo position has run or failed (durable_hold.c).
	 */
	if (!durable_wal_needed())
		durable_hold_stop();
	else
	{
		durable_hold_checkpoints();
		redo = GetRedoRecPtr();
		if (redo == last_round_redo || redo == failed_round_redo)
			durable_hold_let_go();
	}
}
