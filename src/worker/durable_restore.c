/*
 * durable_restore.c — durable shared tables at the worker's start: the
 * .pending files of creations that committed made .snap files, each
 * snapshot file restored (its kept changes of transactions that did not
 * commit undone), files that could not be restored remembered so that
 * their records are skipped and the catalog keeps naming them, tables the
 * catalog names whose file is gone reported, then the WAL after the files
 * replayed (durable_replay.c) from the oldest retention point.
 *
 * Runs once per worker start, after recovery ended, or on a hot standby
 * once it is consistent (durable.c's poll, durable_standby.c), with
 * restoring set: meanwhile the worker serves only requests that need no
 * durable table (durable_xid_outcome serves them while it waits).
 * Catalog entries change under the catalog lock.
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

/* Undoes the kept changes of (sub)transactions that did not commit,
 * newest first; false with the reason in why when it cannot. */
static bool
undo_uncommitted(cpht_table *t, const char *name, const CphtSnapshot *s, char *why, size_t whylen)
{
	for (uint64 g = 0; g < s->nsegments; g++)
	{
		XidOutcome o = durable_xid_outcome(s->segments[g].subxid);

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

		if ((durable_xid_outcome(seg->subxid) == XID_COMMITTED))
			continue;
		/* runs of one kind, newest first: inserted keys out, deleted back */
		while (end > 0)
		{
			uint64		begin = end - 1;

			while (begin > 0 && seg->deleted[begin - 1] == seg->deleted[end - 1])
				begin--;
			if (!durable_apply_keys(t, name, seg->deleted[end - 1] == 0, seg->keys + begin, end - begin))
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
	entry = durable_install(t, s.dboid, &s.name, s.owner, s.memory_cap_kb, s.transactional, s.capacity,
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
		durable_mark_failed(s.dboid, NameStr(s.name), create_lsn, current_lsn, reason);
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
	durable_mark_failed(name_known ? s.dboid : dboid, name_known ? name : NULL, create_lsn, keep_lsn, reason);
	if (c >= 0)
		failed[durable_failed_index(create_lsn)].file_lsn = cat[c].file_lsn;
	cpht_snapshot_free(&s);
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
		switch (durable_xid_outcome(xid))
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
		durable_mark_failed(dboid, c >= 0 ? NameStr(cat[c].name) : NULL, create_lsn, InvalidXLogRecPtr, reason);
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
	 * ((durable_xid_outcome() == XID_COMMITTED), per saved change and WAL record), never for unrelated
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
	standby_replay = on_standby;
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
		durable_mark_failed(cat[c].dboid, NameStr(cat[c].name), cat[c].create_lsn, InvalidXLogRecPtr, reason);
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
			durable_replay(oldest, oldest);
			break;
		}
	if (!XLogRecPtrIsInvalid(start))
		reached = durable_replay(start, InvalidXLogRecPtr);
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
		cpht_worker_shared_lose(i, reason);
	}
	if (files > 0)
		ereport(LOG, (errmsg("cpht worker restored durable shared tables from %d snapshot files", files)));
	cat = NULL;
	ncat = 0;
	cat_seen = NULL;
	standby_replay = false;
	return reached;
}
