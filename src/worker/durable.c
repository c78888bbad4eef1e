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
 * argument.  A persistent physical replication slot (cpht_durable) keeps
 * the WAL from the oldest snapshot on; each round advances it.
 */
#include "postgres.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

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

#include "cpht.h"
#include "durable.h"
#include "worker.h"

#define SLOT_NAME "cpht_durable"

int			cpht_snapshot_interval = 300;	/* seconds; 0: no timed rounds */
int			cpht_snapshot_wal = 1024;	/* MB of WAL; 0: no such rounds */

typedef struct DurableState
{
	bool		live;			/* a durable table lives at this index */
	XLogRecPtr	snapshot_lsn;	/* its last snapshot */
	bool		changed;		/* since then */
} DurableState;

static DurableState *durable = NULL;	/* by catalog index */
static bool restored = false;	/* the tables of pg_cpht are back */
static bool restoring = false;	/* restore_all runs */
static bool earlier_worker = false; /* another worker ran since shmem init */
static bool slot_ready = false;
static char slot_problem[CPHT_TEXT_LEN];
static TimestampTz last_round = 0;
static XLogRecPtr last_round_lsn = InvalidXLogRecPtr;

/*
 * Snapshot files that could not be restored: their CREATE records must not
 * bring the table back empty, nor their records apply.  For a sound file
 * whose table did not fit (no device, no room, cpht.max_memory) the WAL
 * from its snapshot on is kept (keep_lsn), so that a later start, with
 * room again, can replay it.
 */
typedef struct FailedFile
{
	XLogRecPtr	create_lsn;
	XLogRecPtr	keep_lsn;		/* Invalid: nothing to keep */
} FailedFile;

static FailedFile *failed = NULL;
static int	nfailed = 0;

static int	durable_entry(XLogRecPtr create_lsn);

void
cpht_durable_init(void)
{
	durable = MemoryContextAllocZero(TopMemoryContext,
									 sizeof(DurableState) * cpht_control->max_tables);
	earlier_worker = cpht_control->generation > 0;
	if (MakePGDirectory(CPHT_SNAPSHOT_DIR) < 0 && errno != EEXIST)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", CPHT_SNAPSHOT_DIR)));
}

/* ---- the replication slot ------------------------------------------------- */

static void
ensure_slot(void)
{
	MemoryContext cxt = CurrentMemoryContext;

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

/* The slot keeps WAL from lsn on (it only moves forward). */
static void
advance_slot(XLogRecPtr lsn)
{
	bool		moved = false;

	if (!slot_ready || SearchNamedReplicationSlot(SLOT_NAME, true) == NULL)
	{
		/* dropped by hand: make it again, from now on */
		slot_ready = false;
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

/* ---- snapshot rounds -------------------------------------------------------- */

int
cpht_durable_checkpoint(bool only_changed)
{
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

		if (!durable[i].live)
			continue;
		t = cpht_worker_table(i, e->table_id);
		if (t == NULL)
			continue;
		if (!only_changed || durable[i].changed)
		{
			cpht_snapshot_write(i, e, t, lsn);
			durable[i].snapshot_lsn = lsn;
			durable[i].changed = false;
			written++;
		}
		keep = Min(keep, durable[i].snapshot_lsn);
	}
	for (int i = 0; i < nfailed; i++)
		if (!XLogRecPtrIsInvalid(failed[i].keep_lsn))
			keep = Min(keep, failed[i].keep_lsn);
	advance_slot(keep);
	last_round = GetCurrentTimestamp();
	last_round_lsn = lsn;
	return written;
}

void
cpht_durable_shutdown(void)
{
	MemoryContext cxt = CurrentMemoryContext;

	if (!restored)
		return;
	PG_TRY();
	{
		int			n = cpht_durable_checkpoint(true);

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

long
cpht_durable_timeout(void)
{
	long		ms = 10000;

	if (!restored)
		return 1000;
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
	if (cpht_snapshot_interval > 0 &&
		TimestampDifferenceExceeds(last_round, GetCurrentTimestamp(), cpht_snapshot_interval * 1000))
		return true;
	return cpht_snapshot_wal > 0 &&
		GetXLogInsertRecPtr() - last_round_lsn >= (uint64) cpht_snapshot_wal * 1024 * 1024;
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
	durable[entry].snapshot_lsn = lsn;
	durable[entry].changed = false;
}

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
		e->durable = false;
		memset(&durable[entry], 0, sizeof(DurableState));
		return;
	}
	XLogFlush(cpht_wal_drop(e->create_lsn));
	cpht_snapshot_path(path, sizeof(path), e->dboid, e->create_lsn);
	(void) durable_unlink(path, LOG);
	e->durable = false;
	memset(&durable[entry], 0, sizeof(DurableState));
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
	return CPHT_OK;
}

/* ---- restoring at start --------------------------------------------------------- */

/* Whether (sub)transaction xid committed; waits while it runs (only after a
 * restart of the worker alone can one still run). */
static bool
committed(TransactionId xid)
{
	if (!TransactionIdIsValid(xid))
		return true;
	while (TransactionIdIsInProgress(xid))
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return TransactionIdDidCommit(xid);
}

/*
 * After the worker alone restarted, transactions it served may still run;
 * their outcome decides what their changes become, so wait for them.
 */
static void
wait_for_running_transactions(void)
{
	RunningTransactions running = GetRunningTransactionData();
	TransactionId *xids;
	int			n = running->xcnt;

	xids = palloc(sizeof(TransactionId) * Max(n, 1));
	memcpy(xids, running->xids, sizeof(TransactionId) * n);
	LWLockRelease(ProcArrayLock);
	LWLockRelease(XidGenLock);
	if (n > 0)
		ereport(LOG,
				(errmsg("cpht worker waits for %d running transactions before it restores durable shared tables", n)));
	for (int i = 0; i < n; i++)
		(void) committed(xids[i]);
	pfree(xids);
}

static void
mark_failed(Oid dboid, const char *name, XLogRecPtr create_lsn, XLogRecPtr keep_lsn,
			const char *reason)
{
	CphtControl *ctl = cpht_control;
	int			free_entry = -1;

	failed = failed ? repalloc(failed, sizeof(FailedFile) * (nfailed + 1))
		: MemoryContextAlloc(TopMemoryContext, sizeof(FailedFile));
	failed[nfailed].create_lsn = create_lsn;
	failed[nfailed].keep_lsn = keep_lsn;
	nfailed++;
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
	for (int i = 0; i < nfailed; i++)
		if (failed[i].create_lsn == create_lsn)
			return true;
	return false;
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
install(cpht_table *t, Oid dboid, const NameData *name, Oid owner, bool transactional,
		int64 capacity, XLogRecPtr create_lsn, XLogRecPtr snapshot_lsn)
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
		e->table_id = id;
		e->kind = stats.kind;
		e->device = stats.device;
		e->key_bits = stats.key_bits;
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
	durable[entry].live = true;
	durable[entry].snapshot_lsn = snapshot_lsn;
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
 * newest first. */
static bool
undo_uncommitted(cpht_table *t, const char *name, const CphtSnapshot *s)
{
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
				return false;
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

static void
restore_file(const char *path, const char *file)
{
	CphtSnapshotFile f;
	CphtSnapshot s;
	bool		name_known;
	char		why[CPHT_TEXT_LEN];
	char		reason[CPHT_TEXT_LEN];
	uint32		hi,
				lo;
	Oid			dboid;
	XLogRecPtr	create_lsn = InvalidXLogRecPtr;
	cpht_table *t = NULL;
	int			entry;
	instr_time	start,
				elapsed;
	double		secs;
	XLogRecPtr	keep_lsn = InvalidXLogRecPtr;
	bool		file_fault;

	if (sscanf(file, "%u_%08X%08X.snap", &dboid, &hi, &lo) == 3)
		create_lsn = ((uint64) hi << 32) | lo;
	(void) dboid;
	INSTR_TIME_SET_CURRENT(start);
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
	if (!cpht_snapshot_load(&f, &s, &t, &file_fault, why, sizeof(why)))
	{
		if (!file_fault)
			keep_lsn = f.snapshot_lsn;
		goto fail;
	}
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	secs = INSTR_TIME_GET_DOUBLE(elapsed);
	ereport(LOG,
			(errmsg("cpht worker read durable shared table \"%s\" from \"%s\" into %s memory: " UINT64_FORMAT " bytes in %.3f s, %.2f GB/s",
					NameStr(s.name), path, s.image.params.device == CPHT_DEVICE_GPU ? "GPU" : "host",
					s.file_bytes, secs, secs > 0 ? s.file_bytes / secs / 1e9 : 0.0)));
	if (!undo_uncommitted(t, NameStr(s.name), &s))
	{
		snprintf(why, sizeof(why), "the changes of transactions that did not commit could not be undone");
		cpht_table_destroy(t);
		goto fail;
	}
	entry = install(t, s.dboid, &s.name, s.owner, s.transactional, s.capacity,
					s.create_lsn, s.snapshot_lsn);
	if (entry < 0)
	{
		cpht_table_destroy(t);
		mark_failed(s.dboid, NULL, create_lsn, InvalidXLogRecPtr, "");
		cpht_snapshot_free(&s);
		return;
	}
	durable[entry].changed = s.nsegments > 0;
	cpht_snapshot_free(&s);
	return;

fail:
	snprintf(reason, sizeof(reason), "its snapshot file \"%s\" could not be restored: %s", path, why);
	ereport(WARNING,
			(errmsg("cpht worker could not restore durable shared table \"%s\" from \"%s\"",
					name_known ? NameStr(s.name) : "?", path),
			 errdetail("%s", why),
			 errhint("The file is left in place. Opening the table fails until it is created again under its name.")));
	mark_failed(s.dboid, name_known ? NameStr(s.name) : NULL, create_lsn, keep_lsn, reason);
	cpht_snapshot_free(&s);
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
				entry = install(t, c->dboid, &c->name, c->owner, c->transactional, c->capacity,
								create_lsn, reader->ReadRecPtr);
				if (entry < 0)
					cpht_table_destroy(t);
				else
					durable[entry].changed = true;
				break;
			}
		case XLOG_CPHT_XID:
			break;
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
			}
			break;
		default:
			{
				const xl_cpht_keys *k = (const xl_cpht_keys *) data;
				CphtCatalogEntry *e;
				cpht_table *t;

				entry = durable_entry(k->table);
				if (entry < 0 || reader->ReadRecPtr < durable[entry].snapshot_lsn)
					break;
				e = &cpht_catalog[entry];
				if (e->transactional && !committed(k->xid))
					break;
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
replay(XLogRecPtr start)
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

static void
restore_all(void)
{
	DIR		   *dir;
	struct dirent *de;
	XLogRecPtr	start = InvalidXLogRecPtr;
	XLogRecPtr	slot_lsn;
	int			files = 0;

	if (earlier_worker)
		wait_for_running_transactions();
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
			restore_file(path, de->d_name);
			files++;
		}
	}
	FreeDir(dir);

	for (int i = 0; i < cpht_control->max_tables; i++)
		if (durable[i].live && (XLogRecPtrIsInvalid(start) || durable[i].snapshot_lsn < start))
			start = durable[i].snapshot_lsn;
	slot_lsn = slot_restart_lsn();
	if (!XLogRecPtrIsInvalid(slot_lsn) && (XLogRecPtrIsInvalid(start) || slot_lsn < start))
		start = slot_lsn;
	if (!XLogRecPtrIsInvalid(start))
		replay(start);
	if (files > 0)
		ereport(LOG, (errmsg("cpht worker restored durable shared tables from %d snapshot files", files)));
}

void
cpht_durable_poll(void)
{
	MemoryContext cxt = CurrentMemoryContext;

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
		ensure_slot();
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
	if (!round_due())
		return;
	PG_TRY();
	{
		(void) cpht_durable_checkpoint(true);
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
