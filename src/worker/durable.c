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
 *
 * The work is in these files, sharing the state below through
 * durable_internal.h: this one (the state, start, the poll of the worker's
 * loop), durable_rounds.c (the catalog file, snapshot rounds, EXACT
 * records, checkpoint and shutdown), durable_slot.c (the replication
 * slot), durable_requests.c (the CREATE, DROP, owner and call records of
 * requests), durable_restore.c (the restore at start: snapshot files,
 * files that could not be restored), durable_replay.c (their WAL, at
 * start, on a standby and at its promotion), durable_install.c (what
 * those two share: the outcome of xids, tables put into the catalog),
 * durable_standby.c (a hot standby's worker rolling the files forward
 * along replay), durable_hold.c (checkpoints wait for the round after
 * them) and durable_wal_keep.c (WAL kept past a copy's recovery).  All of
 * it runs in the cpht worker alone, one
 * request or round at a time: the state needs no lock; catalog entries
 * are changed under the catalog lock as everywhere in the worker.
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

DurableState *durable = NULL;	/* by catalog index */
bool		restored = false;	/* the tables of pg_cpht are back */
bool		restoring = false;	/* a restore or a standby's replay runs */
bool		standby_replay = false; /* it runs on a standby */

FailedFile *failed = NULL;
int			nfailed = 0;

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

/* The failed file of a table created at create_lsn, or -1. */
int
durable_failed_index(XLogRecPtr create_lsn)
{
	for (int i = 0; i < nfailed; i++)
		if (failed[i].create_lsn == create_lsn)
			return i;
	return -1;
}

/* A file that could not be restored: its records are skipped, and the
 * catalog keeps naming it (when its name is known). */
void
durable_add_failed(Oid dboid, const char *name, XLogRecPtr create_lsn, XLogRecPtr keep_lsn,
				   XLogRecPtr file_lsn)
{
	int			i = durable_failed_index(create_lsn);

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

/* files of tables dropped during a replay, removed once the catalog that
 * no longer names them is written (TopMemoryContext) */
static List *unlink_later = NIL;

void
durable_unlink_after_catalog(const char *path)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	unlink_later = lappend(unlink_later, pstrdup(path));
	MemoryContextSwitchTo(old);
}

void
durable_catalog_written(void)
{
	ListCell   *lc;

	foreach(lc, unlink_later)
		(void) durable_unlink((char *) lfirst(lc), LOG);
	list_free_deep(unlink_later);
	unlink_later = NIL;
}

/* Forgets what durable[entry] knew. */
void
durable_forget(int entry)
{
	if (durable[entry].saved != NULL)
		pfree(durable[entry].saved);
	memset(&durable[entry], 0, sizeof(DurableState));
}

/* The durable table created at create_lsn, or -1. */
int
durable_entry(XLogRecPtr create_lsn)
{
	for (int i = 0; i < cpht_control->max_tables; i++)
		if (durable[i].live && cpht_catalog[i].create_lsn == create_lsn)
			return i;
	return -1;
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

	if (!restored)
	{
		/* a hot standby's files follow its replay (durable_standby.c) */
		if (RecoveryInProgress())
		{
			durable_standby_poll();
			return;
		}
		/*
		 * The worker's one transaction (the existing databases, for the
		 * sweep after the restore) runs before checkpoints are held: a
		 * transaction's end would let a waiting checkpoint go on early
		 * (durable_hold.c).  From here on a checkpoint waits for the
		 * restore and the round after it.
		 */
		cpht_worker_read_databases();
		durable_hold_checkpoints();
		restoring = true;
		/* a standby promoted holds its tables already, exact up to its last round */
		if (durable_standby_active())
			durable_standby_promoted();
		else
			(void) durable_restore_all(false);
		restoring = false;
		/* like every shared table, for undoing a call canceled late */
		for (int i = 0; i < cpht_control->max_tables; i++)
		{
			cpht_table *t = durable[i].live ? cpht_worker_shared_table(i, cpht_catalog[i].table_id) : NULL;

			if (t != NULL)
				cpht_table_set_logging(t, 1);
		}
		restored = true;
		/* cpht_open calls waiting for the tables go on */
		pg_atomic_write_u32(&cpht_control->durable_ready, 1);
		ConditionVariableBroadcast(&cpht_control->durable_cv);
		/* waits above may have reset the latch of a submitted request */
		SetLatch(MyLatch);
		durable_rounds_start();
		/* what replay changed goes into the files, and the slot moves on */
		PG_TRY();
		{
			(void) cpht_durable_checkpoint(true);
			/* every file is current: WAL kept for the restore goes */
			cpht_kept_wal_remove();
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
	durable_round_if_due();
}
