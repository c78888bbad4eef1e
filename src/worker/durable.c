/*
 * durable.c — durable shared tables in the cpht worker: snapshots, WAL,
 * and what the worker does with both when it starts.
 *
 * A durable table is saved as a snapshot file (snapshot.c) when it is
 * created, in periodic rounds (cpht.snapshot_interval,
 * cpht.snapshot_wal), on cpht_checkpoint() and when the worker stops at a
 * clean shutdown.  Between snapshots every call that changes it writes the
 * keys it inserted or deleted to WAL (durable_wal.c), from the worker,
 * while serving the call: WAL order is the order in which the table
 * changed.
 *
 * A snapshot taken at WAL position L (the insert position, with WAL
 * flushed up to it first) holds the table exactly as the records before L
 * left it, the changes of transactions still open included, and it keeps
 * those transactions' undo lists.  At start the worker restores each file
 * as a copy of its slots, undoes the kept changes of (sub)transactions
 * that did not commit (the commit log says), then reads WAL from the oldest
 * snapshot on and applies, in order, the records at or after each table's
 * L: those of committed (sub)transactions, or all of them on a table that
 * is not transactional; CREATE and DROP records create and drop tables
 * whose snapshot does not say otherwise.  docs/worker.md gives the
 * argument.
 *
 * A table unchanged since its snapshot has no record between the
 * snapshot's L and a later round's position, so its file is exact there
 * too: each round moves its retention point (current_lsn) to the round's
 * position and records it in pg_cpht/catalog (durable_catalog.c), which
 * also names every durable table so that each is accounted for at start.
 * A persistent physical replication slot (cpht_durable) keeps the WAL
 * from the oldest retention point on while some durable table needs it,
 * and is dropped while none does.
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
#include "worker/worker_internal.h"
#include "worker/xacts.h"

#define SLOT_NAME "cpht_durable"


typedef struct DurableState
{
	bool		live;			/* a durable table lives at this index */
	XLogRecPtr	snapshot_lsn;	/* its last snapshot */
	XLogRecPtr	current_lsn;	/* its file is exact here too: no record of
								 * it since snapshot_lsn (replay and the
								 * slot start here) */
	bool		changed;		/* since then */
	XLogRecPtr	first_change;	/* when changed: at or before the start of
								 * its first record since current_lsn */
	XLogRecPtr	prior_snapshot; /* the file a round just replaced, exact */
	XLogRecPtr	prior_until;	/* up to here (Invalid: none to tell) */
	bool		awaiting;		/* at restore: the WAL from current_lsn on
								 * is not in pg_wal (a copy of the data
								 * directory); replay starts at the first
								 * EXACT record naming its file */
	/* (sub)transactions whose changes its file keeps, to be resolved by a
	 * new snapshot once they ended (TopMemoryContext) */
	int			nsaved;
	TransactionId *saved;
	/* the oldest xid of its records since current_lsn (Invalid: none) */
	TransactionId oldest_xid;
} DurableState;

static DurableState *durable = NULL;	/* by catalog index */
static bool restored = false;	/* the tables of pg_cpht are back */
static bool restoring = false;	/* restore_all runs */
static bool slot_ready = false;
static char slot_problem[CPHT_TEXT_LEN];
static TimestampTz last_round = 0;
static XLogRecPtr last_round_lsn = InvalidXLogRecPtr;
static XLogRecPtr last_round_redo = InvalidXLogRecPtr;
static TimestampTz last_resolve_check = 0;

/* Rounds: every table, the changed ones, or only those whose file keeps
 * changes of transactions that ended or records' xids near truncation. */
typedef enum RoundMode
{
	ROUND_ALL,
	ROUND_CHANGED,
	ROUND_RESOLVE
} RoundMode;

/* pg_cpht/catalog as read at start (restore_all), with what became of
 * each entry's file */
static CphtCatalogRecord *cat = NULL;
static int	ncat = 0;
static bool *cat_seen = NULL;

/*
 * Snapshot files that could not be restored: their CREATE records must not
 * bring the table back empty, nor their records apply.  For a sound file
 * whose table did not fit (no device, no room, cpht.max_memory) the WAL
 * from its snapshot on is kept (keep_lsn), so that a later start, with
 * room again, can replay it.
 */
typedef struct FailedFile
{
	Oid			dboid;
	bool		named;			/* name is known */
	NameData	name;
	XLogRecPtr	create_lsn;
	XLogRecPtr	keep_lsn;		/* Invalid: nothing to keep */
	XLogRecPtr	file_lsn;		/* the catalog's, kept for its next version */
} FailedFile;

static FailedFile *failed = NULL;
static int	nfailed = 0;

static int	durable_entry(XLogRecPtr create_lsn);

void
cpht_durable_init(void)
{
	durable = MemoryContextAllocZero(TopMemoryContext,
									 sizeof(DurableState) * cpht_control->max_tables);
	if (MakePGDirectory(CPHT_SNAPSHOT_DIR) < 0 && errno != EEXIST)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", CPHT_SNAPSHOT_DIR)));
}

/* ---- the replication slot ------------------------------------------------- */

/* Creates the slot if it does not exist: slot_ready says whether it does,
 * slot_problem why not. */
static void
ensure_slot(void)
{
	MemoryContext cxt = CurrentMemoryContext;

	slot_ready = false;
	PG_TRY();
	{
		if (SearchNamedReplicationSlot(SLOT_NAME, true) == NULL)
		{
			CheckSlotRequirements();
			ReplicationSlotCreate(SLOT_NAME, false, RS_PERSISTENT, false);
			ReplicationSlotReserveWal();
			ReplicationSlotMarkDirty();
			ReplicationSlotSave();
			ReplicationSlotRelease();
			ReplicationSlotsComputeRequiredLSN();
		}
		slot_ready = true;
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		FlushErrorState();
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		strlcpy(slot_problem, ed->message, sizeof(slot_problem));
		ereport(LOG,
				(errmsg("cpht worker cannot keep WAL for durable shared tables: %s", ed->message),
				 errhint("Durable shared tables need wal_level replica or logical and a free replication slot (max_replication_slots).")));
		FreeErrorData(ed);
	}
	PG_END_TRY();
}

static XLogRecPtr
slot_restart_lsn(void)
{
	ReplicationSlot *s = SearchNamedReplicationSlot(SLOT_NAME, true);
	XLogRecPtr	lsn;

	if (s == NULL)
		return InvalidXLogRecPtr;
	SpinLockAcquire(&s->mutex);
	lsn = s->data.restart_lsn;
	SpinLockRelease(&s->mutex);
	return lsn;
}

/* No durable table needs WAL: the slot goes, so that it holds none. */
static void
drop_slot(void)
{
	MemoryContext cxt = CurrentMemoryContext;

	slot_ready = false;
	if (SearchNamedReplicationSlot(SLOT_NAME, true) == NULL)
		return;
	PG_TRY();
	{
		ReplicationSlotDrop(SLOT_NAME, true);
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		FlushErrorState();
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		ereport(LOG,
				(errmsg("cpht worker could not drop replication slot \"%s\": %s", SLOT_NAME, ed->message)));
		FreeErrorData(ed);
	}
	PG_END_TRY();
}

/* The slot keeps WAL from lsn on (it only moves forward). */
static void
advance_slot(XLogRecPtr lsn)
{
	bool		moved = false;

	if (!slot_ready || SearchNamedReplicationSlot(SLOT_NAME, true) == NULL)
	{
		/* dropped by hand, or none yet: make it again, from now on */
		ensure_slot();
		if (!slot_ready)
			return;
	}
	ReplicationSlotAcquire(SLOT_NAME, true);
	SpinLockAcquire(&MyReplicationSlot->mutex);
	if (lsn > MyReplicationSlot->data.restart_lsn)
	{
		MyReplicationSlot->data.restart_lsn = lsn;
		moved = true;
	}
	SpinLockRelease(&MyReplicationSlot->mutex);
	if (moved)
	{
		ReplicationSlotMarkDirty();
		ReplicationSlotSave();
	}
	ReplicationSlotRelease();
	if (moved)
		ReplicationSlotsComputeRequiredLSN();
}

/*
 * Flushes every WAL record inserted so far.  GetXLogInsertRecPtr names the
 * next record's start, which at the start of a page lies past the page's
 * header; that header is not written until a record follows, so flushing
 * up to there fails ("xlog flush request ... is not satisfied").  All that
 * was inserted ends at the page boundary then.
 */
static void
flush_inserted(XLogRecPtr insert)
{
	XLogRecPtr	end = insert;

	if (XLogSegmentOffset(insert, wal_segment_size) == SizeOfXLogLongPHD)
		end = insert - SizeOfXLogLongPHD;
	else if (insert % XLOG_BLCKSZ == SizeOfXLogShortPHD)
		end = insert - SizeOfXLogShortPHD;
	XLogFlush(end);
}

/* ---- the catalog file ------------------------------------------------------- */

/* The failed file of a table created at create_lsn, or -1. */
static int
failed_index(XLogRecPtr create_lsn)
{
	for (int i = 0; i < nfailed; i++)
		if (failed[i].create_lsn == create_lsn)
			return i;
	return -1;
}

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

		if (!durable[i].live)
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
	pfree(recs);
}

/* write_catalog where a failure must not undo what was done: a LOG, and
 * the next round writes it again. */
static void
write_catalog_or_log(void)
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
static bool
wal_needed(void)
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
static void
snapshot_written(int i, XLogRecPtr lsn)
{
	DurableState *d = &durable[i];

	/* for write_exact: the file replaced was exact up to its first change */
	d->prior_snapshot = d->snapshot_lsn;
	d->prior_until = d->changed ? d->first_change : InvalidXLogRecPtr;
	d->first_change = InvalidXLogRecPtr;
	d->snapshot_lsn = lsn;
	d->current_lsn = lsn;
	d->changed = false;
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

		if (!d->live)
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
	flush_inserted(lsn);
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];
		cpht_table *t;
		bool		write;

		if (!durable[i].live)
			continue;
		t = cpht_worker_table(i, e->table_id);
		if (t == NULL)
			continue;
		if (mode == ROUND_ALL)
			write = true;
		else if (mode == ROUND_CHANGED && durable[i].changed)
			write = true;
		else
			write = needs_resolve(i);
		if (write)
		{
			cpht_snapshot_write(i, e, t, lsn);
			snapshot_written(i, lsn);
			written++;
		}
		else if (!durable[i].changed)
		{
			/* no record of it since its file: the file is exact at lsn */
			durable[i].current_lsn = lsn;
		}
		keep = Min(keep, durable[i].current_lsn);
	}
	for (int i = 0; i < nfailed; i++)
		if (!XLogRecPtrIsInvalid(failed[i].keep_lsn))
			keep = Min(keep, failed[i].keep_lsn);
	/* the retention points are on disk before the slot lets WAL go */
	write_catalog(clean, lsn);
	write_exact();
	if (wal_needed())
		advance_slot(keep);
	else
		drop_slot();
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
	return snapshot_round(only_changed ? ROUND_CHANGED : ROUND_ALL, false);
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
	if (wal_needed())
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
	if (wal_needed() && GetRedoRecPtr() != last_round_redo)
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

/* ---- requests ---------------------------------------------------------------- */

static void
check_durable_possible(void)
{
	if (!restored)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable shared cpht tables cannot be created yet"),
				 errdetail("The cpht worker restores the durable tables once the server has ended recovery; a standby creates none.")));
	/* the slot exists while a durable table does, from before its CREATE
	 * record on */
	if (!slot_ready || SearchNamedReplicationSlot(SLOT_NAME, true) == NULL)
		ensure_slot();
	if (!slot_ready)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable shared cpht tables need a replication slot"),
				 errdetail("The cpht worker could not create replication slot \"%s\": %s.", SLOT_NAME, slot_problem),
				 errhint("Set wal_level to replica or logical and max_replication_slots above the slots in use, and restart the server.")));
}

void
cpht_durable_created(int entry, cpht_table *t, const cpht_params *params)
{
	CphtCatalogEntry *e = &cpht_catalog[entry];
	MemoryContext cxt = CurrentMemoryContext;
	XLogRecPtr	lsn;

	check_durable_possible();
	e->create_lsn = cpht_wal_create(e, params);
	e->durable = true;
	lsn = GetXLogInsertRecPtr();
	flush_inserted(lsn);
	PG_TRY();
	{
		cpht_snapshot_write(entry, e, t, lsn);
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
	snapshot_written(entry, lsn);
	/* a file of an earlier table of that name is no longer reported */
	for (int i = 0; i < nfailed; i++)
		if (failed[i].named && failed[i].dboid == e->dboid &&
			strcmp(NameStr(failed[i].name), NameStr(e->name)) == 0)
		{
			failed[i].named = false;
			failed[i].keep_lsn = InvalidXLogRecPtr;
		}
	write_catalog_or_log();
}

/* Forgets what durable[entry] knew. */
static void
forget_state(int entry)
{
	if (durable[entry].saved != NULL)
		pfree(durable[entry].saved);
	memset(&durable[entry], 0, sizeof(DurableState));
}

static void add_failed(Oid dboid, const char *name, XLogRecPtr create_lsn, XLogRecPtr keep_lsn,
					   XLogRecPtr file_lsn);

void
cpht_durable_dropped(int entry)
{
	CphtCatalogEntry *e = &cpht_catalog[entry];
	char		path[MAXPGPATH];

	if (!e->durable)
		return;
	/*
	 * A table restore_all could not replay is lost for now, but its file
	 * and WAL stay for the next start; any other drop or loss is for good.
	 */
	if (restoring)
	{
		/* the catalog keeps naming it */
		add_failed(e->dboid, NameStr(e->name), e->create_lsn, InvalidXLogRecPtr,
				   durable[entry].snapshot_lsn);
		e->durable = false;
		forget_state(entry);
		return;
	}
	XLogFlush(cpht_wal_drop(e->create_lsn));
	e->durable = false;
	forget_state(entry);
	/*
	 * The catalog forgets it before its file goes: a crash in between
	 * leaves a file that the next start restores and the DROP record
	 * drops.  The slot goes with the last table.
	 */
	if (restored)
	{
		write_catalog_or_log();
		if (!wal_needed())
			drop_slot();
	}
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

/* ---- restoring at start --------------------------------------------------------- */

typedef enum XidOutcome
{
	XID_COMMITTED,
	XID_ABORTED,
	XID_UNKNOWN					/* older than what pg_xact keeps */
} XidOutcome;

/*
 * Whether (sub)transaction xid committed; waits while it runs (only after
 * a restart of the worker alone can one still run).  An xid that pg_xact
 * no longer covers (PostgreSQL truncated it) is XID_UNKNOWN rather than
 * an ERROR: asking would fail at every start.  XactTruncationLock keeps
 * the truncation from passing the xid while pg_xact is read.
 *
 * The worker is in the proc array (connected to no database) and holds no
 * xid, so TransactionIdIsInProgress skipping its own position skips
 * nothing.
 */
static XidOutcome
xid_outcome(TransactionId xid)
{
	bool		did;

	if (!TransactionIdIsValid(xid))
		return XID_COMMITTED;
	for (;;)
	{
		LWLockAcquire(XactTruncationLock, LW_SHARED);
		if (TransactionIdPrecedes(xid, ShmemVariableCache->oldestClogXid) ||
			!TransactionIdPrecedes(xid, XidFromFullTransactionId(ReadNextFullTransactionId())))
		{
			LWLockRelease(XactTruncationLock);
			return XID_UNKNOWN;
		}
		if (!TransactionIdIsInProgress(xid))
			break;
		LWLockRelease(XactTruncationLock);
		/*
		 * Meanwhile the worker serves what needs no durable table, the
		 * requests of the transaction waited for included (so it can go
		 * on and end, its end messages too): no session reaches a durable
		 * table before the restore ends (cpht_open, cpht_tables() and
		 * creation wait for it, older handles name the previous worker's
		 * tables, and request_table refuses one while restoring), and a
		 * drop of a database or a creation waits for it (databases.c,
		 * op_create).
		 */
		cpht_worker_serve();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	did = TransactionIdDidCommit(xid);
	LWLockRelease(XactTruncationLock);
	return did ? XID_COMMITTED : XID_ABORTED;
}

static bool
committed(TransactionId xid)
{
	return xid_outcome(xid) == XID_COMMITTED;
}

/* A file that could not be restored: its records are skipped, and the
 * catalog keeps naming it (when its name is known). */
static void
add_failed(Oid dboid, const char *name, XLogRecPtr create_lsn, XLogRecPtr keep_lsn,
		   XLogRecPtr file_lsn)
{
	int			i = failed_index(create_lsn);

	if (i < 0)
	{
		failed = failed ? repalloc(failed, sizeof(FailedFile) * (nfailed + 1))
			: MemoryContextAlloc(TopMemoryContext, sizeof(FailedFile));
		i = nfailed++;
		memset(&failed[i], 0, sizeof(FailedFile));
	}
	failed[i].dboid = dboid;
	failed[i].create_lsn = create_lsn;
	failed[i].keep_lsn = keep_lsn;
	failed[i].file_lsn = file_lsn;
	if (name != NULL)
	{
		failed[i].named = true;
		namestrcpy(&failed[i].name, name);
	}
}

static void
mark_failed(Oid dboid, const char *name, XLogRecPtr create_lsn, XLogRecPtr keep_lsn,
			const char *reason)
{
	CphtControl *ctl = cpht_control;
	int			free_entry = -1;

	add_failed(dboid, name, create_lsn, keep_lsn, InvalidXLogRecPtr);
	if (name == NULL)
		return;
	/* opening it by name says why it is not there */
	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	for (int i = 0; i < ctl->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];

		if (e->state != CPHT_ENTRY_FREE && e->dboid == dboid && strcmp(NameStr(e->name), name) == 0)
		{
			if (e->state == CPHT_ENTRY_LOST)
				free_entry = i;
			else
			{
				free_entry = -2;
				break;
			}
		}
		else if (e->state == CPHT_ENTRY_FREE && free_entry == -1)
			free_entry = i;
	}
	if (free_entry >= 0)
	{
		CphtCatalogEntry *e = &cpht_catalog[free_entry];

		memset(e->lost_reason, 0, CPHT_TEXT_LEN);
		namestrcpy(&e->name, name);
		e->dboid = dboid;
		e->owner = InvalidOid;	/* unknown: only superusers pass */
		e->table_id = ctl->next_table_id++;
		e->durable = false;
		strlcpy(e->lost_reason, reason, CPHT_TEXT_LEN);
		e->state = CPHT_ENTRY_LOST;
	}
	LWLockRelease(ctl->catalog_lock);
}

static bool
is_failed(XLogRecPtr create_lsn)
{
	return failed_index(create_lsn) >= 0;
}

/* The durable table created at create_lsn, or -1. */
static int
durable_entry(XLogRecPtr create_lsn)
{
	for (int i = 0; i < cpht_control->max_tables; i++)
		if (durable[i].live && cpht_catalog[i].create_lsn == create_lsn)
			return i;
	return -1;
}

/*
 * Puts table t into the catalog as a live durable table; -1 (and a
 * WARNING) when its name is taken or no entry is free.
 */
static int
install(cpht_table *t, Oid dboid, const NameData *name, Oid owner, int32 memory_cap_kb,
		bool transactional, int64 capacity, XLogRecPtr create_lsn, XLogRecPtr snapshot_lsn,
		XLogRecPtr current_lsn)
{
	CphtControl *ctl = cpht_control;
	cpht_stats	stats;
	int			entry = -1;

	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	for (int i = 0; i < ctl->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];

		if (e->state != CPHT_ENTRY_FREE && e->dboid == dboid &&
			strcmp(NameStr(e->name), NameStr(*name)) == 0)
		{
			if (e->state != CPHT_ENTRY_LOST)
			{
				entry = -2;
				break;
			}
			/* the table a previous worker lost comes back here */
			entry = i;
		}
	}
	for (int i = 0; entry == -1 && i < ctl->max_tables; i++)
		if (cpht_catalog[i].state == CPHT_ENTRY_FREE)
			entry = i;
	if (entry < 0)
	{
		LWLockRelease(ctl->catalog_lock);
		ereport(WARNING,
				(errmsg("cpht worker could not restore durable shared table \"%s\"", NameStr(*name)),
				 entry == -2 ? errdetail("A shared table of that name exists already.")
				 : errdetail("Every catalog entry is taken (cpht.max_shared_tables)."),
				 errhint("Its snapshot file stays in \"%s\".", CPHT_SNAPSHOT_DIR)));
		return -1;
	}
	{
		CphtCatalogEntry *e = &cpht_catalog[entry];
		uint64		id = ctl->next_table_id++;

		(void) cpht_table_stats(t, &stats);
		memset(e->lost_reason, 0, CPHT_TEXT_LEN);
		e->name = *name;
		e->dboid = dboid;
		e->owner = owner;
		e->memory_cap_kb = memory_cap_kb;
		e->table_id = id;
		e->kind = stats.kind;
		e->device = stats.device;
		/* 0: the width follows the keys, as dispatch.c's create says */
		e->key_bits = stats.auto_key_bits ? 0 : stats.key_bits;
		e->capacity = capacity;
		e->bytes = stats.table_bytes;
		e->transactional = transactional;
		e->durable = true;
		e->create_lsn = create_lsn;
		pg_atomic_write_u64(&e->count, cpht_table_count(t));
		cpht_worker_table_install(entry, id, t, transactional);
		e->state = CPHT_ENTRY_LIVE;
	}
	LWLockRelease(ctl->catalog_lock);
	forget_state(entry);
	durable[entry].live = true;
	durable[entry].snapshot_lsn = snapshot_lsn;
	durable[entry].current_lsn = current_lsn;
	durable[entry].changed = false;
	return entry;
}

/* Applies keys to a table being restored; false (WARNING) on failure. */
static bool
apply_keys(cpht_table *t, const char *name, bool erase, const uint64 *keys, uint64 n)
{
	cpht_status st;

	if (n == 0)
		return true;
	if (erase)
	{
		uint8	   *present = malloc(n);

		st = present ? cpht_table_erase(t, keys, n, present) : CPHT_ERR_NOMEM;
		free(present);
	}
	else
	{
		uint64		inserted;

		st = cpht_table_put(t, keys, n, &inserted);
	}
	if (st != CPHT_OK)
		ereport(WARNING,
				(errmsg("cpht worker could not replay changes of durable shared table \"%s\"", name),
				 errdetail("%s", st == CPHT_ERR_NOMEM ? "out of memory" : cpht_table_error(t))));
	return st == CPHT_OK;
}

/* Undoes the kept changes of (sub)transactions that did not commit,
 * newest first; false with the reason in why when it cannot. */
static bool
undo_uncommitted(cpht_table *t, const char *name, const CphtSnapshot *s, char *why, size_t whylen)
{
	for (uint64 g = 0; g < s->nsegments; g++)
	{
		if (xid_outcome(s->segments[g].subxid) == XID_UNKNOWN)
		{
			snprintf(why, whylen,
					 "it keeps changes of transaction %u, whose outcome PostgreSQL no longer keeps (pg_xact was truncated since)",
					 s->segments[g].subxid);
			return false;
		}
	}
	for (uint64 g = s->nsegments; g-- > 0;)
	{
		const CphtSnapshotSegment *seg = &s->segments[g];
		uint64		end = seg->n;

		if (committed(seg->subxid))
			continue;
		/* runs of one kind, newest first: inserted keys out, deleted back */
		while (end > 0)
		{
			uint64		begin = end - 1;

			while (begin > 0 && seg->deleted[begin - 1] == seg->deleted[end - 1])
				begin--;
			if (!apply_keys(t, name, seg->deleted[end - 1] == 0, seg->keys + begin, end - begin))
			{
				snprintf(why, whylen, "the changes of transactions that did not commit could not be undone");
				return false;
			}
			end = begin;
		}
	}
	return true;
}

/* Bytes of a snapshot's slot arrays and stash: the table it restores. */
static uint64
image_bytes(const cpht_image_info *image)
{
	uint64		bytes = image->nstash * sizeof(uint64);

	for (int l = 0; l < image->levels; l++)
		bytes += image->level_bytes[l];
	return bytes;
}

/* The entry of pg_cpht/catalog for the table created at create_lsn, or -1. */
static int
cat_index(XLogRecPtr create_lsn)
{
	for (int i = 0; i < ncat; i++)
		if (cat[i].create_lsn == create_lsn)
			return i;
	return -1;
}

static void
restore_file(const char *path, const char *file)
{
	CphtSnapshotFile f;
	CphtSnapshot s;
	bool		name_known = false;
	char		why[CPHT_TEXT_LEN];
	char		reason[CPHT_TEXT_LEN];
	uint32		hi,
				lo;
	Oid			dboid = InvalidOid;
	XLogRecPtr	create_lsn = InvalidXLogRecPtr;
	cpht_table *t = NULL;
	int			entry;
	instr_time	start,
				elapsed;
	double		secs;
	XLogRecPtr	keep_lsn = InvalidXLogRecPtr;
	XLogRecPtr	current_lsn;
	bool		file_fault;
	int			c;
	const char *name;
	int			fd;

	memset(&s, 0, sizeof(s));
	if (sscanf(file, "%u_%08X%08X.snap", &dboid, &hi, &lo) == 3)
		create_lsn = ((uint64) hi << 32) | lo;
	c = cat_index(create_lsn);
	if (c >= 0)
		cat_seen[c] = true;
	INSTR_TIME_SET_CURRENT(start);
	/* a file that cannot be opened (its permissions) may be sound: its WAL stays */
	fd = open(path, O_RDONLY | PG_BINARY, 0);
	if (fd < 0)
	{
		snprintf(why, sizeof(why), "could not open it: %m");
		if (c >= 0 && !XLogRecPtrIsInvalid(cat[c].current_lsn))
			keep_lsn = cat[c].current_lsn;
		goto fail;
	}
	close(fd);
	if (!cpht_snapshot_open(path, &f, &s, &name_known, why, sizeof(why)))
		goto fail;
	/*
	 * The server's cpht.max_memory caps a restored table as the creating
	 * session's cap did its creation: a table above it stays on disk.
	 */
	if (cpht_max_memory_kb > 0 && image_bytes(&s.image) > (uint64) cpht_max_memory_kb * 1024)
	{
		snprintf(why, sizeof(why),
				 "its table needs " UINT64_FORMAT " bytes, more than cpht.max_memory (%d kB) allows: raise it and restart the server",
				 image_bytes(&s.image), cpht_max_memory_kb);
		cpht_snapshot_close(&f);
		keep_lsn = s.snapshot_lsn;
		goto fail;
	}
	s.image.params.cpu_threads = 0; /* this machine's cores */
	/* the catalog may know a later position at which the file is exact */
	current_lsn = s.snapshot_lsn;
	if (c >= 0 && cat[c].file_lsn == s.snapshot_lsn && cat[c].current_lsn > current_lsn)
		current_lsn = cat[c].current_lsn;
	if (!cpht_snapshot_load(&f, &s, &t, &file_fault, why, sizeof(why)))
	{
		if (!file_fault)
			keep_lsn = current_lsn;
		goto fail;
	}
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	secs = INSTR_TIME_GET_DOUBLE(elapsed);
	ereport(LOG,
			(errmsg("cpht worker read durable shared table \"%s\" from \"%s\" into %s memory: " UINT64_FORMAT " bytes in %.3f s, %.2f GB/s",
					NameStr(s.name), path, s.image.params.device == CPHT_DEVICE_GPU ? "GPU" : "host",
					s.file_bytes, secs, secs > 0 ? s.file_bytes / secs / 1e9 : 0.0)));
	if (!undo_uncommitted(t, NameStr(s.name), &s, why, sizeof(why)))
	{
		cpht_table_destroy(t);
		goto fail;
	}
	entry = install(t, s.dboid, &s.name, s.owner, s.memory_cap_kb, s.transactional, s.capacity,
					s.create_lsn, s.snapshot_lsn, current_lsn);
	if (entry < 0)
	{
		/*
		 * No catalog entry was free (cpht.max_shared_tables lowered for
		 * this start) or its name is taken: a passing problem, not the
		 * file's.  The catalog keeps naming the table and its WAL stays
		 * from where replay would have begun, so that a start with room
		 * brings it back as it was (install said why, in a WARNING).
		 */
		cpht_table_destroy(t);
		snprintf(reason, sizeof(reason),
				 "it could not be restored at the cpht worker's start: every shared table entry was taken (cpht.max_shared_tables) or its name was");
		mark_failed(s.dboid, NameStr(s.name), create_lsn, current_lsn, reason);
		failed[failed_index(create_lsn)].file_lsn = s.snapshot_lsn;
		cpht_snapshot_free(&s);
		return;
	}
	durable[entry].changed = s.nsegments > 0;
	cpht_snapshot_free(&s);
	return;

fail:
	/* the catalog names a table whose file does not say */
	if (name_known)
		name = NameStr(s.name);
	else if (c >= 0)
	{
		name = NameStr(cat[c].name);
		dboid = cat[c].dboid;
		name_known = true;
	}
	else
		name = file;
	if (name_known && !OidIsValid(s.dboid))
		s.dboid = dboid;
	snprintf(reason, sizeof(reason), "its snapshot file \"%s\" could not be restored: %s", path, why);
	ereport(WARNING,
			(errmsg("cpht worker could not restore durable shared table \"%s\" from \"%s\"", name, path),
			 errdetail("%s", why),
			 errhint("The file is left in place. Opening the table fails until it is created again under its name.")));
	mark_failed(name_known ? s.dboid : dboid, name_known ? name : NULL, create_lsn, keep_lsn, reason);
	if (c >= 0)
		failed[failed_index(create_lsn)].file_lsn = cat[c].file_lsn;
	cpht_snapshot_free(&s);
}

/*
 * The first pass over the WAL of a copy of the data directory: each table
 * awaiting (its WAL from current_lsn on is not in pg_wal) takes, from the
 * first EXACT record naming its file, a position at which that file is
 * exact, provided the WAL there is (from oldest on) holds every record of
 * the table after it.
 */
static void
scan_exact(XLogReaderState *reader, XLogRecPtr oldest)
{
	uint8		info;
	const char *data = cpht_wal_payload(reader, &info);
	xl_cpht_exact x;
	const char *p;

	if (data == NULL || info != XLOG_CPHT_EXACT)
		return;
	memcpy(&x, data, sizeof(x));
	p = data + sizeof(x);
	for (uint32 k = 0; k < x.ntables; k++, p += sizeof(xl_cpht_exact_table))
	{
		xl_cpht_exact_table et;
		XLogRecPtr	at;
		int			entry;

		memcpy(&et, p, sizeof(et));
		at = XLogRecPtrIsInvalid(et.until) ? reader->ReadRecPtr : et.until;
		entry = durable_entry(et.table);
		if (entry >= 0 && durable[entry].awaiting &&
			durable[entry].snapshot_lsn == et.snapshot_lsn && at >= oldest)
		{
			durable[entry].awaiting = false;
			durable[entry].current_lsn = at;
		}
	}
}

/* Every table a record names that is still to be replayed, by create_lsn. */
static void
replay_record(XLogReaderState *reader)
{
	uint8		info;
	const char *data = cpht_wal_payload(reader, &info);
	int			entry;

	if (data == NULL)
		return;
	switch (info)
	{
		case XLOG_CPHT_CREATE:
			{
				const xl_cpht_create *c = (const xl_cpht_create *) data;
				XLogRecPtr	create_lsn = reader->EndRecPtr;
				cpht_table *t;
				char		errbuf[CPHT_TEXT_LEN];

				if (durable_entry(create_lsn) >= 0 || is_failed(create_lsn))
					break;
				if (cpht_table_create(&c->params, &t, errbuf, sizeof(errbuf)) != CPHT_OK)
				{
					char		reason[CPHT_TEXT_LEN];

					snprintf(reason, sizeof(reason), "it could not be created again from WAL: %s", errbuf);
					ereport(WARNING,
							(errmsg("cpht worker could not restore durable shared table \"%s\"", NameStr(c->name)),
							 errdetail("%s", reason)));
					mark_failed(c->dboid, NameStr(c->name), create_lsn, InvalidXLogRecPtr, reason);
					break;
				}
				entry = install(t, c->dboid, &c->name, c->owner, cpht_wal_create_cap(reader),
								c->transactional, c->capacity,
								create_lsn, reader->ReadRecPtr, reader->ReadRecPtr);
				if (entry < 0)
					cpht_table_destroy(t);
				else
					durable[entry].changed = true;
				break;
			}
		case XLOG_CPHT_XID:
			break;
		case XLOG_CPHT_EXACT:
			/* read by scan_exact, before */
			break;
		case XLOG_CPHT_OWNER:
			{
				const xl_cpht_owner *o = (const xl_cpht_owner *) data;

				/* as a change of its keys: only after its file */
				entry = durable_entry(o->table);
				if (entry < 0 || durable[entry].awaiting ||
					reader->ReadRecPtr < durable[entry].current_lsn)
					break;
				LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
				cpht_catalog[entry].owner = o->owner;
				LWLockRelease(cpht_control->catalog_lock);
				durable[entry].changed = true;
				break;
			}
		case XLOG_CPHT_DROP:
			entry = durable_entry(((const xl_cpht_drop *) data)->table);
			if (entry >= 0)
			{
				char		path[MAXPGPATH];

				/* dropped for good: its file goes (restoring keeps files) */
				cpht_snapshot_path(path, sizeof(path), cpht_catalog[entry].dboid,
								   cpht_catalog[entry].create_lsn);
				(void) durable_unlink(path, LOG);
				cpht_worker_table_drop(entry);
				/* dropped, not failed: the catalog forgets it */
				if ((entry = failed_index(((const xl_cpht_drop *) data)->table)) >= 0)
				{
					failed[entry].named = false;
					failed[entry].keep_lsn = InvalidXLogRecPtr;
				}
			}
			break;
		default:
			{
				const xl_cpht_keys *k = (const xl_cpht_keys *) data;
				CphtCatalogEntry *e;
				cpht_table *t;

				entry = durable_entry(k->table);
				if (entry < 0 || durable[entry].awaiting ||
					reader->ReadRecPtr < durable[entry].current_lsn)
					break;
				e = &cpht_catalog[entry];
				if (e->transactional)
				{
					XidOutcome o = xid_outcome(k->xid);

					if (o == XID_UNKNOWN)
					{
						char		reason[CPHT_TEXT_LEN];

						snprintf(reason, sizeof(reason),
								 "its changes in WAL name transaction %u, whose outcome PostgreSQL no longer keeps (pg_xact was truncated since)",
								 k->xid);
						ereport(WARNING,
								(errmsg("cpht worker could not replay durable shared table \"%s\"", NameStr(e->name)),
								 errdetail("%s", reason)));
						cpht_worker_table_lose(entry, reason);
						break;
					}
					if (o != XID_COMMITTED)
						break;
				}
				t = cpht_worker_table(entry, e->table_id);
				if (!apply_keys(t, NameStr(e->name), info == XLOG_CPHT_ERASE,
								(const uint64 *) (data + sizeof(xl_cpht_keys)),
								(XLogRecGetDataLen(reader) - sizeof(xl_cpht_keys)) / sizeof(uint64)))
				{
					cpht_worker_table_lose(entry, "its changes in WAL could not be replayed");
					break;
				}
				durable[entry].changed = true;
			}
	}
}

/* Loses every restored table: their WAL cannot be read. */
static void
lose_all(const char *reason)
{
	for (int i = 0; i < cpht_control->max_tables; i++)
		if (durable[i].live)
			cpht_worker_table_lose(i, reason);
}

static void
replay(XLogRecPtr start, XLogRecPtr scan_from)
{
	ReadLocalXLogPageNoWaitPrivate priv;
	XLogReaderState *reader;
	XLogRecPtr	first;
	char	   *errormsg = NULL;
	volatile uint64 records = 0;
	MemoryContext cxt = CurrentMemoryContext;
	char		reason[CPHT_TEXT_LEN];

	memset(&priv, 0, sizeof(priv));
	reader = XLogReaderAllocate(wal_segment_size, NULL,
								XL_ROUTINE(.page_read = read_local_xlog_page_no_wait,
										   .segment_open = wal_segment_open,
										   .segment_close = wal_segment_close),
								&priv);
	if (reader == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory while allocating a WAL reading processor")));
	reason[0] = '\0';
	/*
	 * WAL removed since (the slot was dropped by hand, say) is an ERROR of
	 * the page reader, which would end the worker at every start: the
	 * tables that need it are lost instead.
	 */
	PG_TRY();
	{
		first = XLogFindNextRecord(reader, start);
		if (XLogRecPtrIsInvalid(first))
		{
			if (!priv.end_of_wal)
				snprintf(reason, sizeof(reason), "the WAL from %X/%X on, which it needs, could not be read",
						 LSN_FORMAT_ARGS(start));
			/* else nothing was written since the snapshots */
		}
		else
		{
			for (;;)
			{
				XLogRecord *rec = XLogReadRecord(reader, &errormsg);

				if (rec == NULL)
					break;
				if (!XLogRecPtrIsInvalid(scan_from))
					scan_exact(reader, scan_from);
				else
					replay_record(reader);
				records++;
				CHECK_FOR_INTERRUPTS();
			}
			if (!priv.end_of_wal && errormsg != NULL)
				ereport(LOG,
						(errmsg("cpht worker stopped reading WAL at %X/%X: %s",
								LSN_FORMAT_ARGS(reader->EndRecPtr), errormsg)));
			ereport(LOG,
					(errmsg("cpht worker read " UINT64_FORMAT " WAL records from %X/%X to %X/%X for durable shared tables",
							records, LSN_FORMAT_ARGS(first), LSN_FORMAT_ARGS(reader->EndRecPtr))));
		}
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		FlushErrorState();
		snprintf(reason, sizeof(reason), "the WAL from %X/%X on, which it needs, could not be read: %s",
				 LSN_FORMAT_ARGS(start), ed->message);
		FreeErrorData(ed);
	}
	PG_END_TRY();
	if (reason[0] != '\0')
	{
		ereport(WARNING,
				(errmsg("cpht worker cannot replay durable shared tables: %s", reason),
				 errhint("The replication slot \"%s\" keeps that WAL; was it dropped?", SLOT_NAME)));
		lose_all(reason);
	}
	XLogReaderFree(reader);
}

/* The start of the oldest WAL segment in pg_wal (Invalid: none). */
static XLogRecPtr
oldest_wal(void)
{
	DIR		   *dir = AllocateDir(XLOGDIR);
	struct dirent *de;
	XLogSegNo	oldest = 0;
	bool		any = false;
	XLogRecPtr	lsn;

	while ((de = ReadDir(dir, XLOGDIR)) != NULL)
	{
		TimeLineID	tli;
		XLogSegNo	segno;

		if (!IsXLogFileName(de->d_name))
			continue;
		XLogFromFileName(de->d_name, &tli, &segno, wal_segment_size);
		if (!any || segno < oldest)
			oldest = segno;
		any = true;
	}
	FreeDir(dir);
	if (!any)
		return InvalidXLogRecPtr;
	XLogSegNoOffsetToRecPtr(oldest, 0, wal_segment_size, lsn);
	return lsn;
}

/* restore_file, where an ERROR loses that file's table, not the worker */
static void
restore_file_guarded(const char *path, const char *file)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		restore_file(path, file);
	}
	PG_CATCH();
	{
		ErrorData  *ed;
		uint32		hi,
					lo;
		Oid			dboid = InvalidOid;
		XLogRecPtr	create_lsn = InvalidXLogRecPtr;
		int			c;
		char		reason[CPHT_TEXT_LEN];

		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		FlushErrorState();
		LWLockReleaseAll();
		if (sscanf(file, "%u_%08X%08X.snap", &dboid, &hi, &lo) == 3)
			create_lsn = ((uint64) hi << 32) | lo;
		c = cat_index(create_lsn);
		snprintf(reason, sizeof(reason), "its snapshot file \"%s\" could not be restored: %s", path, ed->message);
		ereport(WARNING,
				(errmsg("cpht worker could not restore durable shared table \"%s\" from \"%s\"",
						c >= 0 ? NameStr(cat[c].name) : file, path),
				 errdetail("%s", ed->message),
				 errhint("The file is left in place. Opening the table fails until it is created again under its name.")));
		mark_failed(dboid, c >= 0 ? NameStr(cat[c].name) : NULL, create_lsn, InvalidXLogRecPtr, reason);
		FreeErrorData(ed);
	}
	PG_END_TRY();
}

static void
restore_all(void)
{
	DIR		   *dir;
	struct dirent *de;
	XLogRecPtr	start = InvalidXLogRecPtr;
	XLogRecPtr	slot_lsn;
	XLogRecPtr	oldest;
	int			files = 0;
	bool		clean;
	XLogRecPtr	clean_at;
	char		why[CPHT_TEXT_LEN];

	/*
	 * After a restart of the worker alone, transactions it served may still
	 * run: the restore waits only for those whose changes it must decide
	 * (committed(), per saved change and WAL record), never for unrelated
	 * ones such as a prepared transaction that wrote no cpht table.
	 */
	/* the tables the worker knew of, whatever became of their files */
	if (!cpht_catalog_file_read(&cat, &ncat, &clean, &clean_at, why, sizeof(why)) && why[0] != '\0')
		ereport(WARNING,
				(errmsg("cpht worker could not read the catalog of durable shared tables \"%s/catalog\"",
						CPHT_SNAPSHOT_DIR),
				 errdetail("%s", why),
				 errhint("The tables of the snapshot files there are restored; a table whose file is missing is not reported.")));
	cat_seen = palloc0(sizeof(bool) * Max(ncat, 1));
	dir = AllocateDir(CPHT_SNAPSHOT_DIR);
	while ((de = ReadDir(dir, CPHT_SNAPSHOT_DIR)) != NULL)
	{
		char		path[MAXPGPATH];
		size_t		len = strlen(de->d_name);

		snprintf(path, sizeof(path), "%s/%s", CPHT_SNAPSHOT_DIR, de->d_name);
		/* a snapshot that was being written when the server stopped */
		if (len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0)
			(void) unlink(path);
		else if (len > 5 && strcmp(de->d_name + len - 5, ".snap") == 0)
		{
			restore_file_guarded(path, de->d_name);
			files++;
		}
	}
	FreeDir(dir);
	/* a table the catalog names whose file is gone */
	for (int c = 0; c < ncat; c++)
	{
		char		path[MAXPGPATH];
		char		reason[CPHT_TEXT_LEN];

		if (cat_seen[c])
			continue;
		cpht_snapshot_path(path, sizeof(path), cat[c].dboid, cat[c].create_lsn);
		if (cat[c].lost)
		{
			/* lost before, and its file removed by hand since: forgotten */
			ereport(LOG,
					(errmsg("cpht worker forgets durable shared table \"%s\", lost before: its snapshot file \"%s\" was removed",
							NameStr(cat[c].name), path)));
			continue;
		}
		snprintf(reason, sizeof(reason), "its snapshot file \"%s\" is missing", path);
		ereport(WARNING,
				(errmsg("cpht worker could not restore durable shared table \"%s\"", NameStr(cat[c].name)),
				 errdetail("Its snapshot file \"%s\" is missing.", path),
				 errhint("Opening the table fails until it is created again under its name.")));
		mark_failed(cat[c].dboid, NameStr(cat[c].name), cat[c].create_lsn, InvalidXLogRecPtr, reason);
	}

	/*
	 * A table whose WAL is not in pg_wal is not needed from there if the
	 * worker stopped cleanly at its retention point: it wrote no record
	 * after that, so there is nothing to replay.  Otherwise (the slot was
	 * dropped or invalidated; or this is a base backup, or a standby made
	 * from one, whose WAL begins at the backup's start) replay looks for
	 * an EXACT record naming its file in the WAL there is, and the table
	 * is lost if none comes.
	 */
	oldest = oldest_wal();
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		if (!durable[i].live || XLogRecPtrIsInvalid(oldest) || durable[i].current_lsn >= oldest)
			continue;
		if (clean && durable[i].current_lsn >= clean_at)
		{
			durable[i].current_lsn = oldest;
			continue;
		}
		durable[i].awaiting = true;
	}
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		XLogRecPtr	from;

		if (!durable[i].live)
			continue;
		from = durable[i].awaiting ? oldest : durable[i].current_lsn;
		if (XLogRecPtrIsInvalid(start) || from < start)
			start = from;
	}
	slot_lsn = slot_restart_lsn();
	if (!XLogRecPtrIsInvalid(slot_lsn) && (XLogRecPtrIsInvalid(start) || slot_lsn < start) &&
		(XLogRecPtrIsInvalid(oldest) || slot_lsn >= oldest))
		start = slot_lsn;
	/* a copy of the data directory: EXACT records first, then replay */
	for (int i = 0; i < cpht_control->max_tables; i++)
		if (durable[i].live && durable[i].awaiting)
		{
			replay(oldest, oldest);
			break;
		}
	if (!XLogRecPtrIsInvalid(start))
		replay(start, InvalidXLogRecPtr);
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		char		reason[CPHT_TEXT_LEN];

		if (!durable[i].live || !durable[i].awaiting)
			continue;
		durable[i].awaiting = false;
		snprintf(reason, sizeof(reason), "the WAL from %X/%X on, which it needs, was removed",
				 LSN_FORMAT_ARGS(durable[i].current_lsn));
		ereport(WARNING,
				(errmsg("cpht worker could not restore durable shared table \"%s\"", NameStr(cpht_catalog[i].name)),
				 errdetail("The WAL from %X/%X on, which it needs, was removed, and no later snapshot round in the WAL there is says that its file is still exact.",
						   LSN_FORMAT_ARGS(durable[i].current_lsn)),
				 errhint("The replication slot \"%s\" keeps that WAL; was it dropped or invalidated (max_slot_wal_keep_size)? A base backup holds the table only if a snapshot round ran while it was taken.", SLOT_NAME)));
		cpht_worker_table_lose(i, reason);
	}
	if (files > 0)
		ereport(LOG, (errmsg("cpht worker restored durable shared tables from %d snapshot files", files)));
	cat = NULL;
	ncat = 0;
	cat_seen = NULL;
}

bool
cpht_durable_restoring(void)
{
	return restoring;
}

void
cpht_durable_poll(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	RoundMode	mode;

	if (!restored)
	{
		if (RecoveryInProgress())
			return;
		restoring = true;
		restore_all();
		restoring = false;
		/* like every shared table, for undoing a call canceled late */
		for (int i = 0; i < cpht_control->max_tables; i++)
		{
			cpht_table *t = durable[i].live ? cpht_worker_table(i, cpht_catalog[i].table_id) : NULL;

			if (t != NULL)
				cpht_table_set_logging(t, 1);
		}
		restored = true;
		/* cpht_open calls waiting for the tables go on */
		pg_atomic_write_u32(&cpht_control->durable_ready, 1);
		ConditionVariableBroadcast(&cpht_control->durable_cv);
		/* waits above may have reset the latch of a submitted request */
		SetLatch(MyLatch);
		last_round = GetCurrentTimestamp();
		last_round_lsn = GetXLogInsertRecPtr();
		/* what replay changed goes into the files, and the slot moves on */
		PG_TRY();
		{
			(void) cpht_durable_checkpoint(true);
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(cxt);
			EmitErrorReport();
			FlushErrorState();
		}
		PG_END_TRY();
		return;
	}
	if (round_due())
		mode = ROUND_CHANGED;
	else if (resolve_due())
		mode = ROUND_RESOLVE;
	else
		return;
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
	}
	PG_END_TRY();
}
