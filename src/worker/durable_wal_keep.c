/*
 * durable_wal_keep.c — the WAL a copy of the data directory needs to
 * restore its durable tables, kept past the end of its recovery.
 *
 * Why: a base backup, or a standby made from one, has no cpht_durable
 * slot (slots do not travel), so nothing keeps the WAL its snapshot files
 * need once recovery ends: the end-of-recovery checkpoint (or, after a
 * promotion, the first checkpoint) removes it, and the worker, which
 * starts reading it only after recovery, would find it gone and report
 * every durable table lost.  So at the end of recovery, in the startup
 * process, the resource manager's cleanup callback copies the WAL
 * segments still in pg_wal into pg_cpht/wal/, when durable tables exist
 * and no slot keeps their WAL; the worker's restore reads a segment from
 * there when pg_wal no longer has it, and removes the copies once a
 * snapshot round after the restore has made every file current.
 *
 * Invariants: nothing here may fail recovery: every problem is a WARNING,
 * and the tables whose WAL could not be kept are reported lost by the
 * restore, as before.  A copy is written to a temporary name, fsync'ed
 * and renamed, so a segment in pg_cpht/wal/ is always whole.  Segments
 * are copied, not linked: PostgreSQL recycles a segment file in place.
 * PostgreSQL's copy_file() (storage/copydir.h) is not used: it raises an
 * ERROR, which in the startup process would stop recovery.
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xlogreader.h"
#include "common/file_perm.h"
#include "replication/slot.h"
#include "storage/fd.h"

#include "worker/durable.h"
#include "worker/durable_internal.h"

#define KEPT_WAL_DIR CPHT_SNAPSHOT_DIR "/wal"

/* Whether pg_cpht holds a snapshot file (or a pending table's). */
static bool
any_snapshot(void)
{
	DIR		   *dir = opendir(CPHT_SNAPSHOT_DIR);
	struct dirent *de;
	bool		found = false;

	if (dir == NULL)
		return false;
	while (!found && (de = readdir(dir)) != NULL)
	{
		size_t		len = strlen(de->d_name);

		found = (len > 5 && strcmp(de->d_name + len - 5, ".snap") == 0) ||
			(len > 8 && strcmp(de->d_name + len - 8, ".pending") == 0);
	}
	closedir(dir);
	return found;
}

/* Copies pg_wal/name into KEPT_WAL_DIR; false with a WARNING on failure. */
static bool
copy_segment(const char *name, char *buf, size_t bufsize, uint64 *bytes)
{
	char		from[MAXPGPATH];
	char		to[MAXPGPATH];
	char		tmp[MAXPGPATH];
	int			in,
				out;
	ssize_t		n = 0;
	bool		ok = true;

	snprintf(from, sizeof(from), "%s/%s", XLOGDIR, name);
	snprintf(to, sizeof(to), "%s/%s", KEPT_WAL_DIR, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", to);
	in = open(from, O_RDONLY | PG_BINARY, 0);
	if (in < 0)
	{
		/* removed meanwhile: nothing to keep */
		if (errno == ENOENT)
			return true;
		ereport(WARNING, (errcode_for_file_access(),
						  errmsg("cpht could not open WAL segment \"%s\" to keep it for durable shared tables: %m", from)));
		return false;
	}
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY, pg_file_create_mode);
	if (out < 0)
	{
		ereport(WARNING, (errcode_for_file_access(),
						  errmsg("cpht could not create file \"%s\": %m", tmp)));
		close(in);
		return false;
	}
	while (ok && (n = read(in, buf, bufsize)) > 0)
	{
		if (write(out, buf, n) != n)
		{
			if (errno == 0)
				errno = ENOSPC;
			ereport(WARNING, (errcode_for_file_access(),
							  errmsg("cpht could not write file \"%s\": %m", tmp)));
			ok = false;
		}
		else
			*bytes += n;
	}
	if (ok && n < 0)
	{
		ereport(WARNING, (errcode_for_file_access(),
						  errmsg("cpht could not read WAL segment \"%s\": %m", from)));
		ok = false;
	}
	if (ok && pg_fsync(out) != 0)
	{
		ereport(WARNING, (errcode_for_file_access(),
						  errmsg("cpht could not fsync file \"%s\": %m", tmp)));
		ok = false;
	}
	close(out);
	close(in);
	if (ok && rename(tmp, to) != 0)
	{
		ereport(WARNING, (errcode_for_file_access(),
						  errmsg("cpht could not rename file \"%s\" to \"%s\": %m", tmp, to)));
		ok = false;
	}
	if (!ok)
		(void) unlink(tmp);
	return ok;
}

/*
 * The resource manager's cleanup at the end of recovery (startup
 * process): keeps the WAL segments in pg_wal, and the timeline history
 * files, for the worker's restore, unless the slot keeps them (crash
 * recovery of the server that wrote them) or there is no durable table.
 */
void
cpht_wal_keep_at_end_of_recovery(void)
{
	DIR		   *dir;
	struct dirent *de;
	char	   *buf;
	uint64		bytes = 0;
	int			segments = 0;
	bool		ok = true;

	if (!any_snapshot() || SearchNamedReplicationSlot(SLOT_NAME, true) != NULL)
		return;
	if (MakePGDirectory(KEPT_WAL_DIR) != 0 && errno != EEXIST)
	{
		ereport(WARNING, (errcode_for_file_access(),
						  errmsg("cpht could not create directory \"%s\": %m", KEPT_WAL_DIR)));
		return;
	}
	buf = palloc(XLOG_BLCKSZ * 16);
	dir = opendir(XLOGDIR);
	if (dir == NULL)
	{
		ereport(WARNING, (errcode_for_file_access(),
						  errmsg("cpht could not open directory \"%s\": %m", XLOGDIR)));
		pfree(buf);
		return;
	}
	while (ok && (de = readdir(dir)) != NULL)
	{
		if (!IsXLogFileName(de->d_name) && !IsTLHistoryFileName(de->d_name))
			continue;
		ok = copy_segment(de->d_name, buf, XLOG_BLCKSZ * 16, &bytes);
		if (ok && IsXLogFileName(de->d_name))
			segments++;
	}
	closedir(dir);
	pfree(buf);
	if (ok)
		fsync_fname(KEPT_WAL_DIR, true);
	ereport(LOG,
			(errmsg("cpht kept %d WAL segments (%llu bytes) in \"%s\" for the restore of durable shared tables",
					segments, (unsigned long long) bytes, KEPT_WAL_DIR),
			 errdetail("No replication slot keeps the WAL their snapshot files need (a base backup, or a standby made from one): the cpht worker reads it from there once recovery has ended.")));
}

/*
 * The page reader's segment_open for the restore: pg_wal, and where it no
 * longer has the segment, the copy kept at the end of recovery.
 */
void
cpht_kept_wal_segment_open(XLogReaderState *state, XLogSegNo segno, TimeLineID *tli)
{
	char		name[MAXFNAMELEN];
	char		path[MAXPGPATH];

	XLogFileName(name, *tli, segno, state->segcxt.ws_segsize);
	snprintf(path, sizeof(path), "%s/%s", XLOGDIR, name);
	state->seg.ws_file = BasicOpenFile(path, O_RDONLY | PG_BINARY);
	if (state->seg.ws_file >= 0)
		return;
	if (errno == ENOENT)
	{
		snprintf(path, sizeof(path), "%s/%s", KEPT_WAL_DIR, name);
		state->seg.ws_file = BasicOpenFile(path, O_RDONLY | PG_BINARY);
		if (state->seg.ws_file >= 0)
			return;
	}
	if (errno == ENOENT)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("requested WAL segment %s has already been removed", name)));
	ereport(ERROR,
			(errcode_for_file_access(),
			 errmsg("could not open file \"%s\": %m", path)));
}

/* The oldest segment number in directory dirname (false: none). */
static bool
oldest_in(const char *dirname, XLogSegNo *oldest)
{
	DIR		   *dir = AllocateDir(dirname);
	struct dirent *de;
	bool		any = false;

	while ((de = ReadDir(dir, dirname)) != NULL)
	{
		TimeLineID	tli;
		XLogSegNo	segno;

		if (!IsXLogFileName(de->d_name))
			continue;
		XLogFromFileName(de->d_name, &tli, &segno, wal_segment_size);
		if (!any || segno < *oldest)
			*oldest = segno;
		any = true;
	}
	FreeDir(dir);
	return any;
}

/* The start of the oldest WAL segment the restore can read (Invalid: none). */
XLogRecPtr
cpht_kept_wal_oldest(void)
{
	XLogSegNo	oldest = 0,
				kept = 0;
	bool		any = oldest_in(XLOGDIR, &oldest);
	XLogRecPtr	lsn;
	struct stat st;

	if (stat(KEPT_WAL_DIR, &st) == 0 && oldest_in(KEPT_WAL_DIR, &kept) &&
		(!any || kept < oldest))
	{
		oldest = kept;
		any = true;
	}
	if (!any)
		return InvalidXLogRecPtr;
	XLogSegNoOffsetToRecPtr(oldest, 0, wal_segment_size, lsn);
	return lsn;
}

/* Once every file is current: the kept segments go. */
void
cpht_kept_wal_remove(void)
{
	struct stat st;

	if (stat(KEPT_WAL_DIR, &st) != 0)
		return;
	if (!rmtree(KEPT_WAL_DIR, true))
		ereport(WARNING,
				(errmsg("cpht worker could not remove directory \"%s\"", KEPT_WAL_DIR)));
	else
		ereport(LOG,
				(errmsg("cpht worker removed the WAL segments kept in \"%s\": every durable shared table has a current snapshot", KEPT_WAL_DIR)));
}
