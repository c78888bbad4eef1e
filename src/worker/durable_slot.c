/*
 * durable_slot.c — the replication slot cpht_durable, which keeps the WAL
 * of durable shared tables from the oldest retention point on: made when
 * a durable table needs it (on a standby, when its worker starts), moved
 * forward by each round, dropped while no table needs WAL; and flushing
 * the WAL inserted so far, which every retention point waits for.
 *
 * The worker alone runs this, one request or round at a time.
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

static bool slot_ready = false;
static char slot_problem[CPHT_TEXT_LEN];

bool
durable_slot_ready(const char **problem)
{
	if (problem)
		*problem = slot_problem;
	return slot_ready;
}

/* ---- the replication slot ------------------------------------------------- */

/*
 * In a PG_CATCH of a slot operation: the error taken out of the error state
 * (in cxt, the caller's context before the PG_TRY) and the slot released if
 * the operation still held it, so that the worker goes on.  The caller logs
 * the error and frees it.
 */
static ErrorData *
slot_error_caught(MemoryContext cxt)
{
	ErrorData  *ed;

	MemoryContextSwitchTo(cxt);
	ed = CopyErrorData();
	FlushErrorState();
	if (MyReplicationSlot != NULL)
		ReplicationSlotRelease();
	return ed;
}

/* Creates the slot if it does not exist: slot_ready says whether it does,
 * slot_problem why not. */
void
durable_ensure_slot(void)
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
		ErrorData  *ed = slot_error_caught(cxt);

		strlcpy(slot_problem, ed->message, sizeof(slot_problem));
		ereport(LOG,
				(errmsg("cpht worker cannot keep WAL for durable shared tables: %s", ed->message),
				 errhint("Durable shared tables need wal_level replica or logical and a free replication slot (max_replication_slots).")));
		FreeErrorData(ed);
	}
	PG_END_TRY();
}

XLogRecPtr
durable_slot_restart_lsn(void)
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
void
durable_drop_slot(void)
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
		ErrorData  *ed = slot_error_caught(cxt);

		ereport(LOG,
				(errmsg("cpht worker could not drop replication slot \"%s\": %s", SLOT_NAME, ed->message)));
		FreeErrorData(ed);
	}
	PG_END_TRY();
}

/* The slot keeps WAL from lsn on (it only moves forward). */
void
durable_advance_slot(XLogRecPtr lsn)
{
	bool		moved = false;

	if (!slot_ready || SearchNamedReplicationSlot(SLOT_NAME, true) == NULL)
	{
		/* dropped by hand, or none yet: make it again, from now on */
		durable_ensure_slot();
		if (!slot_ready)
			return;
	}
	ReplicationSlotAcquire(SLOT_NAME, true);
	SpinLockAcquire(&MyReplicationSlot->mutex);
	if (XLogRecPtrIsInvalid(MyReplicationSlot->data.restart_lsn) &&
		!XLogRecPtrIsInvalid(MyReplicationSlot->data.invalidated_at))
	{
		/*
		 * Invalidated (max_slot_wal_keep_size): it keeps nothing, and
		 * writing a position into it would not bring the WAL back.  Made
		 * again from now on (the tables that needed the lost WAL were lost
		 * at their restore or replay, which said so).
		 */
		SpinLockRelease(&MyReplicationSlot->mutex);
		ReplicationSlotRelease();
		ereport(LOG,
				(errmsg("cpht worker makes replication slot \"%s\" again: it was invalidated", SLOT_NAME)));
		durable_drop_slot();
		durable_ensure_slot();
		return;
	}
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
void
durable_flush_inserted(XLogRecPtr insert)
{
	XLogRecPtr	end = insert;

	if (XLogSegmentOffset(insert, wal_segment_size) == SizeOfXLogLongPHD)
		end = insert - SizeOfXLogLongPHD;
	else if (insert % XLOG_BLCKSZ == SizeOfXLogShortPHD)
		end = insert - SizeOfXLogShortPHD;
	XLogFlush(end);
}
