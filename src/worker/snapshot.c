/*
 * snapshot.c — the snapshot file of a durable shared table.
 *
 * pg_cpht/<dboid>_<create_lsn>.snap, in the data directory:
 *
 *   header      CphtSnapshotHeader: a prefix every version keeps (magic,
 *               version, database, name), then the table's catalog data,
 *               the WAL position the file is consistent with, the image
 *               parameters (layout, counts) and the sizes of what follows
 *   levels      each level's slot array, raw, as the table holds it
 *   stash       the cuckoo stash, sorted keys
 *   segments    changes of transactions open when it was taken: per
 *               segment its (sub)transaction id, its entry count, the
 *               keys, and a byte per key (1 deleted, 0 inserted)
 *   crc         CRC-32C of everything before it
 *
 * Written to pg_cpht/<name>.tmp, fsync'ed, then durable_rename'd over the
 * previous file, so a crash leaves the old file or the new one, never a
 * torn one under the final name (a torn .tmp is removed at start).
 * Integers are in the server's byte order: a data directory moves only
 * between machines of the same architecture anyway.
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "port/pg_crc32c.h"
#include "storage/fd.h"

#include "durable.h"
#include "xacts.h"

#define SNAPSHOT_MAGIC "CPHTSNAP"

typedef struct CphtSnapshotHeader
{
	/* the prefix every format version keeps */
	char		magic[8];
	uint32		version;
	Oid			dboid;
	NameData	name;
	/* version 1 */
	uint32		header_bytes;
	Oid			owner;
	bool		transactional;
	int64		capacity;
	XLogRecPtr	create_lsn;
	XLogRecPtr	snapshot_lsn;
	cpht_image_info image;
	uint64		nsegments;
	uint64		nentries;
} CphtSnapshotHeader;

#define SNAPSHOT_PREFIX_BYTES offsetof(CphtSnapshotHeader, header_bytes)

typedef struct SegmentHeader
{
	TransactionId subxid;
	uint32		pad;
	uint64		n;
} SegmentHeader;

void
cpht_snapshot_path(char *path, size_t len, Oid dboid, XLogRecPtr create_lsn)
{
	snprintf(path, len, "%s/%u_%08X%08X.snap", CPHT_SNAPSHOT_DIR, dboid,
			 LSN_FORMAT_ARGS(create_lsn));
}

/* ---- writing ---------------------------------------------------------------- */

typedef struct SnapWriter
{
	int			fd;
	const char *path;
	pg_crc32c	crc;
	uint64		bytes;
} SnapWriter;

static void
put(SnapWriter *w, const void *data, size_t len)
{
	const char *p = data;

	COMP_CRC32C(w->crc, p, len);
	while (len > 0)
	{
		size_t		piece = Min(len, (size_t) 1 << 30);
		ssize_t		done;

		errno = 0;
		done = write(w->fd, p, piece);
		if (done <= 0)
		{
			if (errno == 0)
				errno = ENOSPC;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not write cpht snapshot file \"%s\": %m", w->path)));
		}
		p += done;
		len -= done;
		w->bytes += done;
	}
}

typedef struct SegmentCount
{
	uint64		nsegments;
	uint64		nentries;
} SegmentCount;

static void
count_segment(void *arg, TransactionId subxid, const uint64 *keys, const uint8 *where, uint64 n)
{
	SegmentCount *c = arg;

	(void) subxid;
	(void) keys;
	(void) where;
	c->nsegments++;
	c->nentries += n;
}

static void
write_segment(void *arg, TransactionId subxid, const uint64 *keys, const uint8 *where, uint64 n)
{
	SnapWriter *w = arg;
	SegmentHeader h;
	uint8	   *deleted = palloc(Max(n, 1));

	memset(&h, 0, sizeof(h));
	h.subxid = subxid;
	h.n = n;
	for (uint64 i = 0; i < n; i++)
		deleted[i] = where[i] != 0;
	put(w, &h, sizeof(h));
	put(w, keys, n * sizeof(uint64));
	put(w, deleted, n);
	pfree(deleted);
}

void
cpht_snapshot_write(int entry, const CphtCatalogEntry *e, cpht_table *t, XLogRecPtr lsn)
{
	char		path[MAXPGPATH];
	char		tmp[MAXPGPATH];
	CphtSnapshotHeader h;
	SegmentCount counts = {0, 0};
	SnapWriter	w;
	cpht_status st;

	cpht_snapshot_path(path, sizeof(path), e->dboid, e->create_lsn);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SNAPSHOT_MAGIC, sizeof(h.magic));
	h.version = CPHT_SNAPSHOT_VERSION;
	h.dboid = e->dboid;
	h.name = e->name;
	h.header_bytes = sizeof(h);
	h.owner = e->owner;
	h.transactional = e->transactional;
	h.capacity = e->capacity;
	h.create_lsn = e->create_lsn;
	h.snapshot_lsn = lsn;
	st = cpht_table_image_info(t, &h.image);
	if (st != CPHT_OK)
		elog(ERROR, "cpht snapshot of table \"%s\": %s", NameStr(e->name), cpht_table_error(t));
	cpht_xacts_each_segment(entry, count_segment, &counts);
	h.nsegments = counts.nsegments;
	h.nentries = counts.nentries;

	w.path = tmp;
	w.bytes = 0;
	INIT_CRC32C(w.crc);
	w.fd = OpenTransientFile(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (w.fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create cpht snapshot file \"%s\": %m", tmp)));
	PG_TRY();
	{
		put(&w, &h, sizeof(h));
		for (int l = 0; l < h.image.levels; l++)
		{
			void	   *buf = malloc(Max(h.image.level_bytes[l], 1));

			if (buf == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_OUT_OF_MEMORY),
						 errmsg("out of memory for the snapshot of shared cpht table \"%s\"", NameStr(e->name)),
						 errdetail("A level of " UINT64_FORMAT " bytes is copied to host memory to be written.",
								   h.image.level_bytes[l])));
			st = cpht_table_image_read_level(t, l, buf);
			if (st != CPHT_OK)
			{
				free(buf);
				elog(ERROR, "cpht snapshot of table \"%s\": %s", NameStr(e->name), cpht_table_error(t));
			}
			put(&w, buf, h.image.level_bytes[l]);
			free(buf);
		}
		if (h.image.nstash > 0)
		{
			uint64	   *stash = palloc(h.image.nstash * sizeof(uint64));

			cpht_table_image_read_stash(t, stash);
			put(&w, stash, h.image.nstash * sizeof(uint64));
			pfree(stash);
		}
		cpht_xacts_each_segment(entry, write_segment, &w);
		FIN_CRC32C(w.crc);
		{
			pg_crc32c	crc = w.crc;

			/* the checksum is not part of what it covers */
			if (write(w.fd, &crc, sizeof(crc)) != sizeof(crc))
			{
				if (errno == 0)
					errno = ENOSPC;
				ereport(ERROR,
						(errcode_for_file_access(),
						 errmsg("could not write cpht snapshot file \"%s\": %m", tmp)));
			}
		}
		if (pg_fsync(w.fd) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not fsync cpht snapshot file \"%s\": %m", tmp)));
	}
	PG_CATCH();
	{
		CloseTransientFile(w.fd);
		unlink(tmp);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (CloseTransientFile(w.fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close cpht snapshot file \"%s\": %m", tmp)));
	(void) durable_rename(tmp, path, ERROR);
}

/* ---- reading ---------------------------------------------------------------- */

typedef struct SnapReader
{
	FILE	   *f;
	pg_crc32c	crc;
} SnapReader;

static bool
get(SnapReader *r, void *data, size_t len)
{
	if (len > 0 && fread(data, 1, len, r->f) != len)
		return false;
	COMP_CRC32C(r->crc, data, len);
	return true;
}

void
cpht_snapshot_free(CphtSnapshot *s)
{
	for (int l = 0; l < CPHT_MAX_LEVELS; l++)
		free(s->levels[l]);
	free(s->stash);
	for (uint64 i = 0; i < s->nsegments && s->segments != NULL; i++)
	{
		free(s->segments[i].keys);
		free(s->segments[i].deleted);
	}
	free(s->segments);
	memset(s, 0, sizeof(*s));
}

bool
cpht_snapshot_read(const char *path, CphtSnapshot *out, bool *name_known,
				   char *why, size_t whylen)
{
	SnapReader	r;
	CphtSnapshotHeader h;
	struct stat st;
	uint64		expected;
	pg_crc32c	stored;
	bool		ok = false;

	memset(out, 0, sizeof(*out));
	*name_known = false;
	r.f = AllocateFile(path, PG_BINARY_R);
	if (r.f == NULL)
	{
		snprintf(why, whylen, "could not open it: %s", strerror(errno));
		return false;
	}
	INIT_CRC32C(r.crc);
	memset(&h, 0, sizeof(h));
	if (fstat(fileno(r.f), &st) != 0 || !get(&r, &h, SNAPSHOT_PREFIX_BYTES) ||
		memcmp(h.magic, SNAPSHOT_MAGIC, sizeof(h.magic)) != 0)
	{
		snprintf(why, whylen, "it is not a cpht snapshot file");
		goto done;
	}
	out->dboid = h.dboid;
	out->name = h.name;
	out->name.data[NAMEDATALEN - 1] = '\0';
	*name_known = true;
	if (h.version != CPHT_SNAPSHOT_VERSION)
	{
		snprintf(why, whylen, "it has snapshot format version %u, and this cpht reads version %d",
				 h.version, CPHT_SNAPSHOT_VERSION);
		goto done;
	}
	if (!get(&r, (char *) &h + SNAPSHOT_PREFIX_BYTES, sizeof(h) - SNAPSHOT_PREFIX_BYTES) ||
		h.header_bytes != sizeof(h) || h.image.levels < 1 || h.image.levels > CPHT_MAX_LEVELS)
	{
		snprintf(why, whylen, "its header is torn or corrupt");
		goto done;
	}
	expected = sizeof(h) + h.image.nstash * sizeof(uint64) +
		h.nsegments * sizeof(SegmentHeader) + h.nentries * (sizeof(uint64) + 1) + sizeof(pg_crc32c);
	for (int l = 0; l < h.image.levels; l++)
		expected += h.image.level_bytes[l];
	if ((uint64) st.st_size != expected)
	{
		snprintf(why, whylen, "it has " UINT64_FORMAT " bytes where its header announces " UINT64_FORMAT " (torn or corrupt)",
				 (uint64) st.st_size, expected);
		goto done;
	}
	out->owner = h.owner;
	out->transactional = h.transactional;
	out->capacity = h.capacity;
	out->create_lsn = h.create_lsn;
	out->snapshot_lsn = h.snapshot_lsn;
	out->image = h.image;
	for (int l = 0; l < h.image.levels; l++)
	{
		out->levels[l] = malloc(Max(h.image.level_bytes[l], 1));
		if (out->levels[l] == NULL)
		{
			snprintf(why, whylen, "out of host memory for its " UINT64_FORMAT " bytes of slots", h.image.level_bytes[l]);
			goto done;
		}
		if (!get(&r, out->levels[l], h.image.level_bytes[l]))
			goto torn;
	}
	out->stash = malloc(Max(h.image.nstash, 1) * sizeof(uint64));
	out->segments = calloc(Max(h.nsegments, 1), sizeof(CphtSnapshotSegment));
	if (out->stash == NULL || out->segments == NULL)
	{
		snprintf(why, whylen, "out of host memory");
		goto done;
	}
	if (!get(&r, out->stash, h.image.nstash * sizeof(uint64)))
		goto torn;
	out->nsegments = h.nsegments;
	for (uint64 i = 0; i < h.nsegments; i++)
	{
		SegmentHeader sh;
		CphtSnapshotSegment *s = &out->segments[i];

		if (!get(&r, &sh, sizeof(sh)) || sh.n > h.nentries)
			goto torn;
		s->subxid = sh.subxid;
		s->n = sh.n;
		s->keys = malloc(Max(sh.n, 1) * sizeof(uint64));
		s->deleted = malloc(Max(sh.n, 1));
		if (s->keys == NULL || s->deleted == NULL)
		{
			snprintf(why, whylen, "out of host memory");
			goto done;
		}
		if (!get(&r, s->keys, sh.n * sizeof(uint64)) || !get(&r, s->deleted, sh.n))
			goto torn;
	}
	FIN_CRC32C(r.crc);
	if (fread(&stored, 1, sizeof(stored), r.f) != sizeof(stored))
		goto torn;
	if (!EQ_CRC32C(stored, r.crc))
	{
		snprintf(why, whylen, "its checksum does not match its contents (corrupt)");
		goto done;
	}
	ok = true;
	goto done;
torn:
	snprintf(why, whylen, "it ends early (torn)");
done:
	FreeFile(r.f);
	if (!ok)
	{
		/* the table's name stays, for the error that names it */
		Oid			dboid = out->dboid;
		NameData	name = out->name;

		cpht_snapshot_free(out);
		out->dboid = dboid;
		out->name = name;
	}
	return ok;
}
