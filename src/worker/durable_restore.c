/*
 * durable_restore.c — durable shared tables at the worker's start: each
 * snapshot file restored (its kept changes of transactions that did not
 * commit undone), then WAL replayed from the oldest retention point
 * (a copy of the data directory first looks for EXACT records), files that
 * could not be restored remembered so that their records are skipped and
 * the catalog keeps naming them, and the outcome of the xids involved.
 *
 * Runs once per worker start, after recovery ended (durable.c's poll),
 * with restoring set: meanwhile the worker serves only requests that need
 * no durable table (xid_outcome serves them while it waits).  Catalog
 * entries change under the catalog lock.
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

/* pg_cpht/catalog as read at start (durable_restore_all), with what became of
 * each entry's file */
static CphtCatalogRecord *cat = NULL;
static int	ncat = 0;
static bool *cat_seen = NULL;

/*
 * Replaying on a standby (durable_standby.c): a transaction still open
 * there is not waited for (the startup process, not the worker, ends
 * it).  A table stops at its first record whose transaction has not
 * ended (DurableState.stopped), the others go on; a CREATE of a
 * transaction not ended is read again next time, from create_stop on.
 */
static bool standby_mode = false;
static XLogRecPtr create_stop = InvalidXLogRecPtr;
static TransactionId create_stop_xid = InvalidTransactionId;

/* ---- restoring at start --------------------------------------------------------- */

typedef enum XidOutcome
{
	XID_COMMITTED,
	XID_ABORTED,
	XID_UNKNOWN,				/* older than what pg_xact keeps */
	XID_OPEN					/* standby_mode: not ended yet (or not
								 * replayed yet) */
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
		if (TransactionIdPrecedes(xid, ShmemVariableCache->oldestClogXid))
		{
			LWLockRelease(XactTruncationLock);
			return XID_UNKNOWN;
		}
		if (!TransactionIdPrecedes(xid, XidFromFullTransactionId(ReadNextFullTransactionId())))
		{
			LWLockRelease(XactTruncationLock);
			/* a standby that has not replayed its first record yet */
			return standby_mode ? XID_OPEN : XID_UNKNOWN;
		}
		if (!TransactionIdIsInProgress(xid))
			break;
		LWLockRelease(XactTruncationLock);
		if (standby_mode)
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

static bool
committed(TransactionId xid)
{
	return xid_outcome(xid) == XID_COMMITTED;
}

static void
mark_failed(Oid dboid, const char *name, XLogRecPtr create_lsn, XLogRecPtr keep_lsn,
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

static bool
is_failed(XLogRecPtr create_lsn)
{
	return durable_failed_index(create_lsn) >= 0;
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
		/* 0: the width follows the keys, as registry.c's create says */
		e->key_bits = stats.auto_key_bits ? 0 : stats.key_bits;
		e->capacity = capacity;
		e->bytes = stats.table_bytes;
		e->transactional = transactional;
		e->durable = true;
		e->create_lsn = create_lsn;
		e->create_xid = InvalidTransactionId;
		pg_atomic_write_u64(&e->count, cpht_table_count(t));
		cpht_worker_table_install(entry, id, t, transactional);
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
		XidOutcome o = xid_outcome(s->segments[g].subxid);

		/* a standby restores a file only once these ended (durable_standby.c) */
		if (o == XID_OPEN)
		{
			snprintf(why, whylen, "it keeps changes of transaction %u, which has not ended on this standby",
					 s->segments[g].subxid);
			return false;
		}
		if (o == XID_UNKNOWN)
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
		failed[durable_failed_index(create_lsn)].file_lsn = s.snapshot_lsn;
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
		failed[durable_failed_index(create_lsn)].file_lsn = cat[c].file_lsn;
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

				if (durable_entry(create_lsn) >= 0 || is_failed(create_lsn))
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
					XidOutcome o = xid_outcome(cpht_wal_create_xid(reader));

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
						mark_failed(c->dboid, NameStr(c->name), create_lsn, InvalidXLogRecPtr, reason);
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

				/* dropped for good: its file goes (restoring keeps files) */
				cpht_snapshot_path(path, sizeof(path), cpht_catalog[entry].dboid,
								   cpht_catalog[entry].create_lsn);
				(void) durable_unlink(path, LOG);
				cpht_worker_table_drop(entry);
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
					XidOutcome o = xid_outcome(k->xid);

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

/*
 * Reads WAL from start on: the EXACT records (scan_from valid) or every
 * record of the durable tables (replay_record).  Returns the position up
 * to which it read: where WAL ends for now.  On a standby, and at its
 * promotion (tables with replayed_lsn), each table that did not stop now
 * holds every record before that position.
 */
static XLogRecPtr
replay(XLogRecPtr start, XLogRecPtr scan_from)
{
	volatile XLogRecPtr reached = start;
	bool		standby_tables = standby_mode;
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
			ereport(standby_mode ? DEBUG1 : LOG,
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
	if (reason[0] != '\0')
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

	standby_mode = true;
	ended = xid_outcome(xid) != XID_OPEN;
	standby_mode = false;
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
 * The .pending files: a table whose creation had not committed when a
 * round wrote it.  A .snap of the same table is newer (written at the
 * commit): the .pending file goes.  Else, if the creation committed, it
 * becomes the table's .snap, restored as any other; if not, it goes.  A
 * creation whose outcome is not known yet on a standby leaves the file
 * (durable_standby.c waits for it first).
 */
static void
resolve_pending_files(void)
{
	DIR		   *dir = AllocateDir(CPHT_SNAPSHOT_DIR);
	struct dirent *de;

	while ((de = ReadDir(dir, CPHT_SNAPSHOT_DIR)) != NULL)
	{
		char		path[MAXPGPATH];
		char		snap[MAXPGPATH];
		Oid			dboid;
		uint32		hi,
					lo;
		TransactionId xid;
		size_t		len = strlen(de->d_name);
		struct stat st;

		if (len <= 8 || strcmp(de->d_name + len - 8, ".pending") != 0 ||
			sscanf(de->d_name, "%u_%08X%08X_%u.pending", &dboid, &hi, &lo, &xid) != 4)
			continue;
		snprintf(path, sizeof(path), "%s/%s", CPHT_SNAPSHOT_DIR, de->d_name);
		cpht_snapshot_path(snap, sizeof(snap), dboid, ((uint64) hi << 32) | lo);
		if (stat(snap, &st) == 0)
		{
			(void) durable_unlink(path, LOG);
			continue;
		}
		switch (xid_outcome(xid))
		{
			case XID_COMMITTED:
				if (durable_rename(path, snap, WARNING) == 0)
					ereport(LOG,
							(errmsg("cpht worker restores \"%s\" as \"%s\": the creation of its table by transaction %u committed",
									path, snap, xid)));
				break;
			case XID_ABORTED:
				(void) durable_unlink(path, LOG);
				break;
			case XID_UNKNOWN:
				ereport(WARNING,
						(errmsg("cpht worker leaves \"%s\" in place: whether transaction %u committed is no longer known",
								path, xid),
						 errdetail("PostgreSQL truncated pg_xact past that transaction; the file holds a durable shared table whose creation it made.")));
				break;
			case XID_OPEN:
				break;
		}
	}
	FreeDir(dir);
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

XLogRecPtr
durable_restore_all(bool on_standby)
{
	XLogRecPtr	reached = InvalidXLogRecPtr;
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
	standby_mode = on_standby;
	resolve_pending_files();
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
	oldest = cpht_kept_wal_oldest();
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
	slot_lsn = durable_slot_restart_lsn();
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
		reached = replay(start, InvalidXLogRecPtr);
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
	standby_mode = false;
	return reached;
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

	standby_mode = on_standby;
	reached = replay(from, InvalidXLogRecPtr);
	standby_mode = false;
	return reached;
}
