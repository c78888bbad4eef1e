/*
 * durable_replay.c — the WAL records of durable shared tables replayed into
 * the tables the worker restored: at start after the files
 * (durable_restore.c), on a hot standby in rounds (durable_standby.c), and
 * at its promotion.  A copy of the data directory first looks for EXACT
 * records (scan_exact).  Each record applies to a table from its
 * retention point on (its file's position, or on a standby the position
 * up to which the table holds its records) if its transaction committed
 * (or the table is not transactional); CREATE, DROP and owner records
 * make, drop and change tables.
 *
 * On a standby no transaction is waited for (the startup process, not the
 * worker, ends them): a table stops at its first record of a transaction
 * that has not ended there (DurableState.stopped), the others go on, and a
 * CREATE whose transaction has not ended is read again next time, from
 * create_stop on (the slot keeps that WAL).
 *
 * The worker alone runs this, with "restoring" set.
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


static XLogRecPtr create_stop = InvalidXLogRecPtr;
static bool replay_failed = false;	/* the last replay could not read WAL */

bool
durable_replay_failed(void)
{
	return replay_failed;
}

static TransactionId create_stop_xid = InvalidTransactionId;

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

/*
 * Whether a record of table entry at lsn is to be replayed: not while the
 * table awaits its EXACT record or has stopped at an open transaction,
 * and not if the table holds it already (its file, or an earlier replay
 * on a standby).
 */
static bool
replays(int entry, XLogRecPtr lsn)
{
	DurableState *d = &durable[entry];

	if (d->awaiting || d->stopped)
		return false;
	return lsn >= (XLogRecPtrIsInvalid(d->replayed_lsn) ? d->current_lsn : d->replayed_lsn);
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

				if (durable_entry(create_lsn) >= 0 || (durable_failed_index(create_lsn) >= 0))
					break;
				/*
				 * Created inside a transaction block: only if that
				 * (sub)transaction committed.  Its file was never written
				 * before the commit, so a table rolled back, or whose
				 * transaction a crash ended, is not made again, and its
				 * later records find no table.
				 */
				if (TransactionIdIsValid(cpht_wal_create_xid(reader)))
				{
					XidOutcome o = durable_xid_outcome(cpht_wal_create_xid(reader));

					if (o == XID_OPEN)
					{
						if (XLogRecPtrIsInvalid(create_stop))
						{
							create_stop = reader->ReadRecPtr;
							create_stop_xid = cpht_wal_create_xid(reader);
						}
						break;
					}
					if (o == XID_ABORTED)
						break;
					if (o == XID_UNKNOWN)
					{
						char		reason[CPHT_TEXT_LEN];

						snprintf(reason, sizeof(reason),
								 "its creation in WAL names transaction %u, whose outcome PostgreSQL no longer keeps (pg_xact was truncated since)",
								 cpht_wal_create_xid(reader));
						ereport(WARNING,
								(errmsg("cpht worker could not restore durable shared table \"%s\"", NameStr(c->name)),
								 errdetail("%s", reason)));
						durable_mark_failed(c->dboid, NameStr(c->name), create_lsn, InvalidXLogRecPtr, reason);
						break;
					}
				}
				if (cpht_table_create(&c->params, &t, errbuf, sizeof(errbuf)) != CPHT_OK)
				{
					char		reason[CPHT_TEXT_LEN];

					snprintf(reason, sizeof(reason), "it could not be created again from WAL: %s", errbuf);
					ereport(WARNING,
							(errmsg("cpht worker could not restore durable shared table \"%s\"", NameStr(c->name)),
							 errdetail("%s", reason)));
					durable_mark_failed(c->dboid, NameStr(c->name), create_lsn, InvalidXLogRecPtr, reason);
					break;
				}
				entry = durable_install(t, c->dboid, &c->name, c->owner, cpht_wal_create_cap(reader),
								c->transactional, c->capacity,
								create_lsn, reader->ReadRecPtr, reader->ReadRecPtr);
				if (entry < 0)
				{
					/*
					 * Its name is taken (on a standby, by a table of its
					 * own sessions) or no entry is free: a passing
					 * problem, as for a file (durable_restore.c).  The
					 * WAL from its CREATE record on stays, so that a
					 * start with room brings it back (install said why).
					 */
					cpht_table_destroy(t);
					durable_mark_failed(c->dboid, NameStr(c->name), create_lsn, reader->ReadRecPtr,
										"it could not be created from WAL: every shared table entry was taken (cpht.max_shared_tables) or its name was");
				}
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
				if (entry < 0 || !replays(entry, reader->ReadRecPtr))
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

				/*
				 * Dropped for good: its file goes once the catalog no
				 * longer names it (the next catalog written), as a drop
				 * on the primary does (restoring keeps files otherwise).
				 */
				cpht_snapshot_path(path, sizeof(path), cpht_catalog[entry].dboid,
								   cpht_catalog[entry].create_lsn);
				durable_unlink_after_catalog(path);
				cpht_worker_shared_drop(entry);
				/* dropped, not failed: the catalog forgets it */
				if ((entry = durable_failed_index(((const xl_cpht_drop *) data)->table)) >= 0)
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
				if (entry < 0 || !replays(entry, reader->ReadRecPtr))
					break;
				e = &cpht_catalog[entry];
				if (e->transactional)
				{
					XidOutcome o = durable_xid_outcome(k->xid);

					if (o == XID_OPEN)
					{
						durable[entry].stopped = true;
						durable[entry].stop_xid = k->xid;
						durable[entry].replayed_lsn = reader->ReadRecPtr;
						break;
					}
					if (o == XID_UNKNOWN)
					{
						char		reason[CPHT_TEXT_LEN];

						snprintf(reason, sizeof(reason),
								 "its changes in WAL name transaction %u, whose outcome PostgreSQL no longer keeps (pg_xact was truncated since)",
								 k->xid);
						ereport(WARNING,
								(errmsg("cpht worker could not replay durable shared table \"%s\"", NameStr(e->name)),
								 errdetail("%s", reason)));
						cpht_worker_shared_lose(entry, reason);
						break;
					}
					if (o != XID_COMMITTED)
						break;
				}
				t = cpht_worker_shared_table(entry, e->table_id);
				if (!durable_apply_keys(t, NameStr(e->name), info == XLOG_CPHT_ERASE,
								(const uint64 *) (data + sizeof(xl_cpht_keys)),
								(XLogRecGetDataLen(reader) - sizeof(xl_cpht_keys)) / sizeof(uint64)))
				{
					cpht_worker_shared_lose(entry, "its changes in WAL could not be replayed");
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
			cpht_worker_shared_lose(i, reason);
}

/*
 * Reads WAL from start on: the EXACT records (scan_from valid) or every
 * record of the durable tables (replay_record).  Returns the position up
 * to which it read: where WAL ends for now.  On a standby, and at its
 * promotion (tables with replayed_lsn), each table that did not stop now
 * holds every record before that position.
 */
XLogRecPtr
durable_replay(XLogRecPtr start, XLogRecPtr scan_from)
{
	volatile XLogRecPtr reached = start;
	bool		standby_tables = standby_replay;
	ReadLocalXLogPageNoWaitPrivate priv;
	XLogReaderState *reader;
	XLogRecPtr	first;
	char	   *errormsg = NULL;
	volatile uint64 records = 0;
	MemoryContext cxt = CurrentMemoryContext;
	char		reason[CPHT_TEXT_LEN];

	for (int i = 0; i < cpht_control->max_tables; i++)
		if (durable[i].live && !XLogRecPtrIsInvalid(durable[i].replayed_lsn))
			standby_tables = true;
	memset(&priv, 0, sizeof(priv));
	reader = XLogReaderAllocate(wal_segment_size, NULL,
								XL_ROUTINE(.page_read = read_local_xlog_page_no_wait,
										   .segment_open = cpht_kept_wal_segment_open,
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
				reached = reader->EndRecPtr;
				records++;
				CHECK_FOR_INTERRUPTS();
			}
			if (!priv.end_of_wal && errormsg != NULL)
				ereport(LOG,
						(errmsg("cpht worker stopped reading WAL at %X/%X: %s",
								LSN_FORMAT_ARGS(reader->EndRecPtr), errormsg)));
			ereport(standby_replay ? DEBUG1 : LOG,
					(errmsg("cpht worker read " UINT64_FORMAT " WAL records from %X/%X to %X/%X for durable shared tables",
							records, LSN_FORMAT_ARGS(first), LSN_FORMAT_ARGS(reached))));
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
	replay_failed = reason[0] != '\0';
	if (replay_failed)
	{
		ereport(WARNING,
				(errmsg("cpht worker cannot replay durable shared tables: %s", reason),
				 errhint("The replication slot \"%s\" keeps that WAL; was it dropped?", SLOT_NAME)));
		lose_all(reason);
	}
	XLogReaderFree(reader);
	if (XLogRecPtrIsInvalid(scan_from) && standby_tables)
		for (int i = 0; i < cpht_control->max_tables; i++)
			if (durable[i].live && !durable[i].stopped)
				durable[i].replayed_lsn = Max(reached, durable[i].replayed_lsn);
	return reached;
}

/* The first CREATE a standby's replay left for later (Invalid: none). */
XLogRecPtr
durable_replay_create_stop(void)
{
	return create_stop;
}

/* Whether xid has ended on this standby (its outcome is known). */
static bool
ended_on_standby(TransactionId xid)
{
	bool		ended;

	standby_replay = true;
	ended = durable_xid_outcome(xid) != XID_OPEN;
	standby_replay = false;
	return ended;
}

/*
 * A table that stopped at a record of a transaction that has ended since
 * (or every stopped table: all) goes on from that record, and so does a
 * CREATE that waited; the others stay stopped and skip what is read, so
 * that WAL already read is read again only where an outcome became
 * known.  Returns where the next replay starts.
 */
XLogRecPtr
durable_replay_next_start(XLogRecPtr reached, bool all)
{
	XLogRecPtr	from = reached;

	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		DurableState *d = &durable[i];

		if (!d->live || !d->stopped || (!all && !ended_on_standby(d->stop_xid)))
			continue;
		d->stopped = false;
		from = Min(from, d->replayed_lsn);
	}
	if (!XLogRecPtrIsInvalid(create_stop) && (all || ended_on_standby(create_stop_xid)))
	{
		from = Min(from, create_stop);
		create_stop = InvalidXLogRecPtr;
	}
	return from;
}

/*
 * The records of the durable tables from "from" on, into the tables the
 * worker holds: on a standby up to the first record whose transaction has
 * not ended there (durable_standby.c, between rounds), else to the end of
 * WAL (at promotion, after the standby's last round).  Returns the
 * position reached.
 */
XLogRecPtr
durable_replay_from(XLogRecPtr from, bool on_standby)
{
	XLogRecPtr	reached;

	standby_replay = on_standby;
	reached = durable_replay(from, InvalidXLogRecPtr);
	standby_replay = false;
	return reached;
}
