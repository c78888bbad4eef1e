/*
 * durable_standby.c — durable shared tables on a hot standby: the cpht
 * worker keeps their snapshot files rolling forward along the WAL the
 * standby replays, so that a standby promoted after streaming for weeks
 * has every table, exactly.
 *
 * Why: a standby's restartpoints remove WAL, and a standby has no slot of
 * the primary's.  Files copied by its base backup, left as they were,
 * would need WAL from the backup on at promotion, long gone by then.
 *
 * How: once the standby is consistent (the worker starts then, with
 * hot_standby on), the worker makes the cpht_durable slot on the standby
 * itself, restores the files as a starting worker does (durable_restore.c)
 * and replays the WAL after them, then in rounds (cpht.snapshot_interval,
 * cpht.snapshot_wal of WAL replayed, cpht_checkpoint() on the standby)
 * replays what came since and writes the changed tables' files
 * (durable_rounds.c, durable_standby_round).  The slot then keeps WAL from
 * the round's position on, and is the primary's slot after promotion.
 *
 * Invariants:
 * - Each table the standby's worker holds is, at its replayed_lsn, exactly
 *   its records before that position whose transaction committed.  Replay
 *   there does not wait for a transaction (the startup process ends them,
 *   not the worker): a table stops at its first record of a transaction
 *   that has not ended on the standby yet, the other tables go on, and a
 *   round writes each changed table's file at its own position.  The
 *   stopped table goes on from that record once the transaction ended
 *   (durable_replay.c, durable_replay_next_start).  A file keeping
 *   changes of an open transaction (a file of the primary's) is restored
 *   only once that transaction ended.
 * - Nothing here writes WAL.  DROP and CREATE records are replayed with
 *   "restoring" set, which keeps durable_requests.c from logging them again.
 * - Sessions on the standby never reach these tables (cpht_open refuses
 *   durable tables there): only this replay changes them.
 * - At promotion the worker replays from the oldest table's position to
 *   the end of WAL, waiting for transactions as after a crash, instead of
 *   restoring the files again (durable.c).
 *
 * The worker alone runs this, one request or round at a time.
 */
#include "postgres.h"

#include <dirent.h>

#include "access/transam.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/procarray.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "worker/durable.h"
#include "worker/durable_internal.h"

static bool active = false;		/* the restore ran: tables are held */
static XLogRecPtr standby_at = InvalidXLogRecPtr;	/* the last replay read
													 * WAL up to here */
static TransactionId waited_for = InvalidTransactionId; /* logged once */
static bool slot_made = false;	/* the slot was made (or could not be) */

bool
durable_standby_active(void)
{
	return active;
}

/* Whether xid has not ended on this standby (or was not replayed yet). */
static bool
still_open(TransactionId xid)
{
	if (!TransactionIdIsNormal(xid))
		return false;
	if (!TransactionIdPrecedes(xid, XidFromFullTransactionId(ReadNextFullTransactionId())))
		return true;
	return TransactionIdIsInProgress(xid);
}

/*
 * Whether a snapshot file keeps changes of a transaction that has not ended
 * here: its outcome decides what the restored table holds, and the
 * standby's worker may not wait for it.  Logs the first such xid once.
 */
static bool
files_wait(void)
{
	DIR		   *dir = AllocateDir(CPHT_SNAPSHOT_DIR);
	struct dirent *de;
	bool		wait = false;

	if (dir == NULL)
		return false;
	while (!wait && (de = ReadDir(dir, CPHT_SNAPSHOT_DIR)) != NULL)
	{
		char		path[MAXPGPATH];
		size_t		len = strlen(de->d_name);
		TransactionId *xids;
		int			n;

		snprintf(path, sizeof(path), "%s/%s", CPHT_SNAPSHOT_DIR, de->d_name);
		/* a table whose creation was open: restored once it committed */
		if (len > 8 && strcmp(de->d_name + len - 8, ".pending") == 0)
		{
			Oid			dboid;
			uint32		hi,
						lo;
			TransactionId xid;

			if (sscanf(de->d_name, "%u_%08X%08X_%u.pending", &dboid, &hi, &lo, &xid) == 4 &&
				still_open(xid))
			{
				wait = true;
				if (xid != waited_for)
					ereport(LOG,
							(errmsg("cpht worker waits for transaction %u to end before it restores durable shared tables on this standby",
									xid),
							 errdetail("File \"%s\" holds a table whose creation that transaction made.", path)));
				waited_for = xid;
			}
			continue;
		}
		if (len <= 5 || strcmp(de->d_name + len - 5, ".snap") != 0)
			continue;
		/* an unreadable file: the restore says why */
		n = cpht_snapshot_kept_xids(path, &xids);
		for (int k = 0; k < n && !wait; k++)
		{
			if (!still_open(xids[k]))
				continue;
			wait = true;
			if (xids[k] != waited_for)
				ereport(LOG,
						(errmsg("cpht worker waits for transaction %u to end before it restores durable shared tables on this standby",
								xids[k]),
						 errdetail("Snapshot file \"%s\" keeps changes of that transaction.", path)));
			waited_for = xids[k];
		}
		if (xids != NULL)
			pfree(xids);
	}
	FreeDir(dir);
	return wait;
}

/* A round, logged and survived when it fails (the next one tries again). */
static int
round_or_log(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			written = 0;

	PG_TRY();
	{
		written = durable_standby_round(standby_at);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
	}
	PG_END_TRY();
	return written;
}

/* The first restore on this standby, once the files allow it. */
static void
start(void)
{
	XLogRecPtr	reached;

	/*
	 * The slot first, before waiting for anything: no restartpoint may
	 * remove what the restore will read (the WAL from the backup's start
	 * on, with its EXACT records) while it waits for a transaction.
	 */
	if (!slot_made)
	{
		if (!durable_standby_keep_wal())
			ereport(LOG,
					(errmsg("cpht worker keeps durable shared tables on this standby without a replication slot"),
					 errdetail("A restartpoint may remove the WAL they need; the primary's tables may then be lost at promotion.")));
		slot_made = true;
	}
	if (files_wait())
		return;
	restoring = true;
	reached = durable_restore_all(true);
	restoring = false;
	if (XLogRecPtrIsInvalid(reached))
	{
		/* no table and nothing read: records from the slot's start on */
		reached = durable_slot_restart_lsn();
		if (XLogRecPtrIsInvalid(reached))
			reached = GetXLogReplayRecPtr(NULL);
	}
	standby_at = reached;
	active = true;
	(void) round_or_log();
	ereport(LOG,
			(errmsg("cpht worker keeps the durable shared tables of this standby from %X/%X on",
					LSN_FORMAT_ARGS(standby_at)),
			 errdetail("Their snapshot files follow replay in rounds; the server restores them from there when it is promoted.")));
}

/* The records since the last replay (and those of tables whose
 * transaction ended since), then a round. */
static int
roll(void)
{
	XLogRecPtr	from = durable_replay_next_start(standby_at, false);
	XLogRecPtr	reached;

	restoring = true;
	reached = durable_replay_from(from, true);
	restoring = false;
	standby_at = Max(standby_at, reached);
	/*
	 * The WAL from "from" on is gone (the slot was dropped or invalidated):
	 * the tables that needed it are lost (a WARNING said so); later
	 * records, a new table's CREATE among them, are read from the oldest
	 * WAL there is, not sought again where it is gone.
	 */
	if (durable_replay_failed())
		standby_at = Max(standby_at, cpht_kept_wal_oldest());
	return round_or_log();
}

static bool
roll_due(void)
{
	TimestampTz last;
	XLogRecPtr	last_lsn;
	bool		any = false;

	durable_last_round(&last, &last_lsn);
	/*
	 * With no durable table a round writes no file, only the catalog and
	 * the slot: one once replay has passed a WAL segment keeps the slot
	 * within a segment of replay (watching for CREATE records), without
	 * writing both every second while WAL flows.
	 */
	for (int i = 0; i < cpht_control->max_tables && !any; i++)
		any = durable[i].live;
	if (!any && GetXLogReplayRecPtr(NULL) >= last_lsn + wal_segment_size)
		return true;
	if (cpht_snapshot_interval > 0 &&
		TimestampDifferenceExceeds(last, GetCurrentTimestamp(), cpht_snapshot_interval * 1000))
		return true;
	return cpht_snapshot_wal > 0 &&
		GetXLogReplayRecPtr(NULL) - last_lsn >= (uint64) cpht_snapshot_wal * 1024 * 1024;
}

void
durable_standby_poll(void)
{
	if (!active)
		start();
	else if (roll_due())
		(void) roll();
}

int
durable_standby_roll(void)
{
	if (!active)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the cpht worker of this standby has not restored the durable shared tables yet"),
				 errdetail("It restores them once the snapshot files keep no change of a transaction still open; the server log says which one it waits for.")));
	return roll();
}

void
durable_standby_promoted(void)
{
	XLogRecPtr	from = durable_replay_next_start(standby_at, true);
	XLogRecPtr	reached = durable_replay_from(from, false);

	active = false;
	ereport(LOG,
			(errmsg("cpht worker replayed the durable shared tables from %X/%X, where this standby's last round left them, to %X/%X",
					LSN_FORMAT_ARGS(from), LSN_FORMAT_ARGS(reached))));
}
