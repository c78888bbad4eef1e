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
 *               (version 1: in the slot encoding before, which the reader
 *               converts)
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

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "port/pg_crc32c.h"
#include "storage/fd.h"

#include "worker/durable.h"
#include "worker/xacts.h"

#define SNAPSHOT_MAGIC "CPHTSNAP"

typedef struct CphtSnapshotHeader
{
	/* the prefix every format version keeps */
	char		magic[8];
	uint32		version;
	Oid			dboid;
	NameData	name;
	/* versions 1 and 2 */
	uint32		header_bytes;
	Oid			owner;
	bool		transactional;
	/*
	 * The table's memory cap (CphtCatalogEntry.memory_cap_kb), in what was
	 * padding: files written before it existed have 0 there (the header
	 * is zeroed before it is filled), which is no cap, and the layout and
	 * the version stay those of version 2.
	 */
	int32		memory_cap_kb;
	int64		capacity;
	XLogRecPtr	create_lsn;
	XLogRecPtr	snapshot_lsn;
	cpht_image_info image;
	uint64		nsegments;
	uint64		nentries;
} CphtSnapshotHeader;

StaticAssertDecl(offsetof(CphtSnapshotHeader, capacity) == 96,
				 "memory_cap_kb must fit in the padding of the version 2 header");

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

void
cpht_snapshot_pending_path(char *path, size_t len, Oid dboid, XLogRecPtr create_lsn,
						   TransactionId xid)
{
	snprintf(path, len, "%s/%u_%08X%08X_%u.pending", CPHT_SNAPSHOT_DIR, dboid,
			 LSN_FORMAT_ARGS(create_lsn), xid);
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
cpht_snapshot_write(int entry, const CphtCatalogEntry *e, cpht_table *t, XLogRecPtr lsn,
					TransactionId pending_xid)
{
	char		path[MAXPGPATH];
	char		tmp[MAXPGPATH];
	CphtSnapshotHeader h;
	SegmentCount counts = {0, 0};
	SnapWriter	w;
	cpht_status st;

	if (TransactionIdIsValid(pending_xid))
		cpht_snapshot_pending_path(path, sizeof(path), e->dboid, e->create_lsn, pending_xid);
	else
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
	h.memory_cap_kb = e->memory_cap_kb;
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

/*
 * The slots are read in pieces of this size into two buffers: while the
 * table's device copies one piece, the next is read (and checksummed)
 * into the other, and the kernel is asked to read ahead the piece after.
 * A restore thus holds 2 pieces of host memory whatever the table's size.
 */
#define RESTORE_PIECE_BYTES ((size_t) 64 << 20)

static bool
get(CphtSnapshotFile *r, void *data, size_t len)
{
	if (len > 0 && fread(data, 1, len, r->f) != len)
		return false;
	COMP_CRC32C(r->crc, data, len);
	r->offset += len;
	return true;
}

void
cpht_snapshot_free(CphtSnapshot *s)
{
	free(s->stash);
	for (uint64 i = 0; i < s->nsegments && s->segments != NULL; i++)
	{
		free(s->segments[i].keys);
		free(s->segments[i].deleted);
	}
	free(s->segments);
	memset(s, 0, sizeof(*s));
}

void
cpht_snapshot_close(CphtSnapshotFile *r)
{
	if (r->f != NULL)
		FreeFile(r->f);
	r->f = NULL;
}

/* Forgets what a failed read filled in, but the table's name, for the
 * error that names it. */
static void
forget(CphtSnapshot *out)
{
	Oid			dboid = out->dboid;
	NameData	name = out->name;

	cpht_snapshot_free(out);
	out->dboid = dboid;
	out->name = name;
}

bool
cpht_snapshot_open(const char *path, CphtSnapshotFile *r, CphtSnapshot *out,
				   bool *name_known, char *why, size_t whylen)
{
	CphtSnapshotHeader h;
	struct stat st;
	uint64		expected;

	memset(out, 0, sizeof(*out));
	memset(r, 0, sizeof(*r));
	*name_known = false;
	r->f = AllocateFile(path, PG_BINARY_R);
	if (r->f == NULL)
	{
		snprintf(why, whylen, "could not open it: %s", strerror(errno));
		return false;
	}
	INIT_CRC32C(r->crc);
	memset(&h, 0, sizeof(h));
	if (fstat(fileno(r->f), &st) != 0 || !get(r, &h, SNAPSHOT_PREFIX_BYTES) ||
		memcmp(h.magic, SNAPSHOT_MAGIC, sizeof(h.magic)) != 0)
	{
		snprintf(why, whylen, "it is not a cpht snapshot file");
		goto fail;
	}
	out->dboid = h.dboid;
	out->name = h.name;
	out->name.data[NAMEDATALEN - 1] = '\0';
	*name_known = true;
	if (h.version != CPHT_SNAPSHOT_VERSION && h.version != 1)
	{
		snprintf(why, whylen, "it has snapshot format version %u, and this cpht reads versions 1 to %d",
				 h.version, CPHT_SNAPSHOT_VERSION);
		goto fail;
	}
	if (!get(r, (char *) &h + SNAPSHOT_PREFIX_BYTES, sizeof(h) - SNAPSHOT_PREFIX_BYTES) ||
		h.header_bytes != sizeof(h) || h.image.levels < 1 || h.image.levels > CPHT_MAX_LEVELS)
	{
		snprintf(why, whylen, "its header is torn or corrupt");
		goto fail;
	}
	expected = sizeof(h) + h.image.nstash * sizeof(uint64) +
		h.nsegments * sizeof(SegmentHeader) + h.nentries * (sizeof(uint64) + 1) + sizeof(pg_crc32c);
	for (int l = 0; l < h.image.levels; l++)
		expected += h.image.level_bytes[l];
	if ((uint64) st.st_size != expected)
	{
		snprintf(why, whylen, "it has " UINT64_FORMAT " bytes where its header announces " UINT64_FORMAT " (torn or corrupt)",
				 (uint64) st.st_size, expected);
		goto fail;
	}
	out->owner = h.owner;
	out->transactional = h.transactional;
	out->memory_cap_kb = Max(h.memory_cap_kb, 0);
	out->capacity = h.capacity;
	out->create_lsn = h.create_lsn;
	out->snapshot_lsn = h.snapshot_lsn;
	out->image = h.image;
	out->file_bytes = expected;
	r->snapshot_lsn = h.snapshot_lsn;
	r->nsegments = h.nsegments;
	r->nentries = h.nentries;
	r->version = h.version;
	(void) posix_fadvise(fileno(r->f), 0, 0, POSIX_FADV_SEQUENTIAL);
	return true;

fail:
	cpht_snapshot_close(r);
	forget(out);
	return false;
}

/*
 * The (sub)transaction ids whose changes the file at path keeps, without
 * reading its slots: a standby's worker restores the file only once each
 * has ended.  -1 when the file cannot be read that far (the restore then
 * says why); the ids are palloc'ed.
 */
int
cpht_snapshot_kept_xids(const char *path, TransactionId **xids)
{
	CphtSnapshotFile r;
	CphtSnapshot s;
	bool		name_known;
	char		why[CPHT_TEXT_LEN];
	off_t		at;
	int			n = 0;

	*xids = NULL;
	if (!cpht_snapshot_open(path, &r, &s, &name_known, why, sizeof(why)))
		return -1;
	at = sizeof(CphtSnapshotHeader) + s.image.nstash * sizeof(uint64);
	for (int l = 0; l < s.image.levels; l++)
		at += s.image.level_bytes[l];
	*xids = palloc(sizeof(TransactionId) * Max(r.nsegments, 1));
	for (uint64 g = 0; g < r.nsegments; g++)
	{
		SegmentHeader h;

		if (fseeko(r.f, at, SEEK_SET) != 0 || fread(&h, sizeof(h), 1, r.f) != 1)
		{
			n = -1;
			break;
		}
		(*xids)[n++] = h.subxid;
		at += sizeof(h) + h.n * (sizeof(uint64) + 1);
	}
	cpht_snapshot_close(&r);
	cpht_snapshot_free(&s);
	return n;
}

/* The slot arrays, piece by piece, into table t; *file_fault tells a torn
 * file from a failed copy. */
static bool
load_levels(CphtSnapshotFile *r, const cpht_image_info *image, cpht_table *t,
			bool *file_fault, char *why, size_t whylen)
{
	void	   *buf[2];
	int			cur = 0;
	bool		ok = true;
	cpht_status st = CPHT_OK;

	buf[0] = cpht_table_image_buffer(t, RESTORE_PIECE_BYTES);
	buf[1] = cpht_table_image_buffer(t, RESTORE_PIECE_BYTES);
	if (buf[0] == NULL || buf[1] == NULL)
	{
		snprintf(why, whylen, "out of host memory for its %zu-byte read buffers", RESTORE_PIECE_BYTES);
		ok = false;
	}
	for (int l = 0; ok && l < image->levels; l++)
	{
		for (uint64 at = 0; ok && at < image->level_bytes[l]; at += RESTORE_PIECE_BYTES)
		{
			uint64		n = Min(image->level_bytes[l] - at, RESTORE_PIECE_BYTES);

			/* the piece after this one comes from disk while this is handled */
			(void) posix_fadvise(fileno(r->f), (off_t) (r->offset + n), (off_t) RESTORE_PIECE_BYTES,
								 POSIX_FADV_WILLNEED);
			if (!get(r, buf[cur], n))
			{
				snprintf(why, whylen, "it ends early (torn)");
				*file_fault = true;
				ok = false;
				break;
			}
			/* version 1 has the same layout with the slot encoding before */
			if (r->version == 1)
				cpht_image_slots_from_v1(buf[cur], n, image->params.slot_bits[l]);
			/* the copy of the other buffer, started before that read */
			st = cpht_table_image_wait(t);
			if (st == CPHT_OK)
				st = cpht_table_image_write(t, l, at, buf[cur], n);
			if (st != CPHT_OK)
			{
				snprintf(why, whylen, "its slots could not be copied to the table: %s", cpht_table_error(t));
				ok = false;
			}
			cur ^= 1;
		}
	}
	/* no copy may read a buffer after it is freed */
	st = cpht_table_image_wait(t);
	if (ok && st != CPHT_OK)
	{
		snprintf(why, whylen, "its slots could not be copied to the table: %s", cpht_table_error(t));
		ok = false;
	}
	if (buf[0] != NULL)
		cpht_table_image_buffer_free(t, buf[0]);
	if (buf[1] != NULL)
		cpht_table_image_buffer_free(t, buf[1]);
	return ok;
}

bool
cpht_snapshot_load(CphtSnapshotFile *r, CphtSnapshot *out, cpht_table **table,
				   bool *file_fault, char *why, size_t whylen)
{
	cpht_table *t = NULL;
	pg_crc32c	stored;
	pg_crc32c	crc;
	cpht_status st;
	bool		ok = false;

	*table = NULL;
	*file_fault = false;
	st = cpht_table_image_begin(&out->image, &t, why, whylen);
	if (st != CPHT_OK)
	{
		/* an image that does not fit its own parameters, or no table */
		*file_fault = st == CPHT_ERR_INVALID;
		t = NULL;
		goto done;
	}
	if (!load_levels(r, &out->image, t, file_fault, why, whylen))
		goto done;
	out->stash = malloc(Max(out->image.nstash, 1) * sizeof(uint64));
	out->segments = calloc(Max(r->nsegments, 1), sizeof(CphtSnapshotSegment));
	if (out->stash == NULL || out->segments == NULL)
	{
		snprintf(why, whylen, "out of host memory");
		goto done;
	}
	if (!get(r, out->stash, out->image.nstash * sizeof(uint64)))
		goto torn;
	out->nsegments = r->nsegments;
	for (uint64 i = 0; i < r->nsegments; i++)
	{
		SegmentHeader sh;
		CphtSnapshotSegment *s = &out->segments[i];

		if (!get(r, &sh, sizeof(sh)) || sh.n > r->nentries)
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
		if (!get(r, s->keys, sh.n * sizeof(uint64)) || !get(r, s->deleted, sh.n))
			goto torn;
	}
	crc = r->crc;
	FIN_CRC32C(crc);
	if (fread(&stored, 1, sizeof(stored), r->f) != sizeof(stored))
		goto torn;
	if (!EQ_CRC32C(stored, crc))
	{
		snprintf(why, whylen, "its checksum does not match its contents (corrupt)");
		*file_fault = true;
		goto done;
	}
	/* what the checksum vouches for, the stash's order included */
	st = cpht_table_image_finish(t, &out->image, out->stash, why, whylen);
	if (st != CPHT_OK)
	{
		*file_fault = st == CPHT_ERR_INVALID;
		goto done;
	}
	ok = true;
	goto done;
torn:
	snprintf(why, whylen, "it ends early (torn)");
	*file_fault = true;
done:
	cpht_snapshot_close(r);
	if (!ok)
	{
		if (t != NULL)
			cpht_table_destroy(t);
		forget(out);
		return false;
	}
	*table = t;
	return true;
}
