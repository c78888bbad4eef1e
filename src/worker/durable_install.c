/*
 * durable_install.c — what the restore of durable shared tables (at the
 * worker's start, durable_restore.c) and its WAL replay (durable_replay.c)
 * share: the outcome of a transaction, a table put into the catalog as a
 * live durable table, keys applied to a table being restored, and a table
 * that could not be restored remembered under its name.
 *
 * The worker alone runs this, during a restore or a standby's replay
 * ("restoring" set); catalog entries change under the catalog lock.
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
XidOutcome
durable_xid_outcome(TransactionId xid)
{
	bool		did;

	if (!TransactionIdIsValid(xid))
		return XID_COMMITTED;
	for (;;)
	{
		LWLockAcquire(XactTruncationLock, LW_SHARED);
		if (TransactionIdPrecedes(xid, ShmemVariableCache->oldestClogXid))
		{
			LWLockRelease(XactTruncationLock);
			return XID_UNKNOWN;
		}
		if (!TransactionIdPrecedes(xid, XidFromFullTransactionId(ReadNextFullTransactionId())))
		{
			LWLockRelease(XactTruncationLock);
			/* a standby that has not replayed its first record yet */
			return standby_replay ? XID_OPEN : XID_UNKNOWN;
		}
		if (!TransactionIdIsInProgress(xid))
			break;
		LWLockRelease(XactTruncationLock);
		if (standby_replay)
			return XID_OPEN;
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

void
durable_mark_failed(Oid dboid, const char *name, XLogRecPtr create_lsn, XLogRecPtr keep_lsn,
			const char *reason)
{
	CphtControl *ctl = cpht_control;
	int			free_entry = -1;

	durable_add_failed(dboid, name, create_lsn, keep_lsn, InvalidXLogRecPtr);
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
		e->create_xid = InvalidTransactionId;
		e->state = CPHT_ENTRY_LOST;
	}
	LWLockRelease(ctl->catalog_lock);
}

/*
 * Puts table t into the catalog as a live durable table; -1 (and a
 * WARNING) when its name is taken or no entry is free.
 */
int
durable_install(cpht_table *t, Oid dboid, const NameData *name, Oid owner, int32 memory_cap_kb,
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
		/* 0: the width follows the keys, as registry.c's create says */
		e->key_bits = stats.auto_key_bits ? 0 : stats.key_bits;
		e->capacity = capacity;
		e->bytes = stats.table_bytes;
		e->transactional = transactional;
		e->durable = true;
		e->create_lsn = create_lsn;
		e->create_xid = InvalidTransactionId;
		pg_atomic_write_u64(&e->count, cpht_table_count(t));
		cpht_worker_shared_install(entry, id, t, transactional);
		e->state = CPHT_ENTRY_LIVE;
	}
	LWLockRelease(ctl->catalog_lock);
	durable_forget(entry);
	durable[entry].live = true;
	durable[entry].snapshot_lsn = snapshot_lsn;
	durable[entry].current_lsn = current_lsn;
	/* cpht_stat_tables: the snapshot it came back from (its time is not
	 * known until the next one) and the WAL it keeps */
	pg_atomic_write_u64(&cpht_catalog[entry].stats.snapshot_lsn, snapshot_lsn);
	pg_atomic_write_u64(&cpht_catalog[entry].stats.wal_keep_lsn, current_lsn);
	durable[entry].changed = false;
	return entry;
}

/* Applies keys to a table being restored; false (WARNING) on failure. */
bool
durable_apply_keys(cpht_table *t, const char *name, bool erase, const uint64 *keys, uint64 n)
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
