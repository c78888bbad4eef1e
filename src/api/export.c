/*
 * export.c — a table's keys out: cpht_export(handle), a stream of bytea
 * chunks any role that may use the table can read (COPY it out, keep it in
 * a table), and cpht_export_file(handle, path), a server file for roles
 * with the privileges of pg_write_server_files.  Both write the format of
 * key_file.h.
 *
 * The keys are read a piece at a time (cpht.batch_size keys, at most a
 * transfer window for a table in the cpht worker), so an export holds two
 * pieces' worth of memory whatever the table's size.  A table that changes
 * between pieces (cpht_table_changes) would give a mix of two states, so
 * that ends the export with 40001: export again.  A transactional shared
 * table is read while no other transaction has changes on it: a piece
 * waits for them as a write would.
 */
#include "postgres.h"

#include <unistd.h>

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "errors.h"
#include "api/export.h"
#include "session/session.h"
#include "api/key_file.h"
#include "memcap.h"
#include "stream/stream.h"

PG_FUNCTION_INFO_V1(cpht_export);
PG_FUNCTION_INFO_V1(cpht_export_file);

/* Reading a table's keys in pieces. */
typedef struct KeyReader
{
	int32		handle;
	uint64		position;
	uint64		changes;		/* of the first piece */
	uint64		count;			/* keys the table held at the first piece */
	uint64		read;			/* keys handed out */
	uint64	   *keys;			/* the current piece */
	size_t		max;
	size_t		n;
	bool		held;			/* the first piece was read, not handed out */
	bool		done;
	CphtReserved reserved;		/* its buffer, against cpht.max_memory */
} KeyReader;

/* The next piece from the table, empty ones skipped; false at the end. */
static bool
reader_fetch(KeyReader *r)
{
	for (;;)
	{
		CphtHandleEntry *h = cpht_handles_use(r->handle);
		CphtScanPiece piece;
		uint64		before = r->position;

		CHECK_FOR_INTERRUPTS();
		cpht_check_call(cpht_tableref_scan(cpht_handle_table(h), &r->position, r->keys, r->max, &piece),
						h->handle, cpht_tableref_error(cpht_handle_table(h)), NULL);
		if (before == 0)
		{
			r->changes = piece.changes;
			r->count = piece.count;
		}
		else if (piece.changes != r->changes)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("cpht table %d changed during its export", r->handle),
					 errdetail("Keys were put or deleted, or the table grew or was rebuilt, after the export had read part of it."),
					 errhint("Export it again while nothing writes to it.")));
		r->n = piece.n;
		if (piece.n > 0)
			return true;
		if (r->position >= piece.end)
			return false;
	}
}

/* Opens a reader in cxt and reads its first piece; *header describes the
 * export. */
static KeyReader *
reader_begin(MemoryContext cxt, int32 handle, CphtKeyFileHeader *header,
			 uint64 caller_bytes_per_key)
{
	CphtHandleEntry *h = cpht_handles_use(handle);
	KeyReader  *r = MemoryContextAllocZero(cxt, sizeof(KeyReader));
	uint64		bytes;

	r->handle = h->handle;
	r->max = (size_t) cpht_batch_size;
	bytes = (uint64) r->max * (sizeof(uint64) + caller_bytes_per_key);
	cpht_reserved_init(&r->reserved, cxt);
	cpht_reserved_add(&r->reserved, bytes, "cpht export buffer");
	r->keys = MemoryContextAllocHuge(cxt, sizeof(uint64) * r->max);

	r->done = !reader_fetch(r);
	r->held = !r->done;
	memset(header, 0, sizeof(*header));
	header->version = CPHT_KEY_FILE_VERSION;
	header->count = r->count;
	header->key_bits = h->key_bits;
	header->kind = h->kind;
	header->device = h->device;
	return r;
}

/* The next piece's keys (r->keys[0..n)), 0 after the last. */
static size_t
reader_next(KeyReader *r)
{
	if (r->held)
		r->held = false;
	else if (r->done || !reader_fetch(r))
	{
		r->done = true;
		r->n = 0;
	}
	if (r->done)
	{
		if (r->read != r->count)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("cpht table %d gave " UINT64_FORMAT " keys to its export but counts " UINT64_FORMAT,
							r->handle, r->read, r->count)));
		return 0;
	}
	r->read += r->n;
	return r->n;
}

/* ---- cpht_export: the stream --------------------------------------------- */

typedef struct ExportStream
{
	KeyReader  *reader;
	CphtKeyFileHeader header;
	pg_crc32c	crc;
	int64		seq;
	int			phase;			/* 0 header, 1 keys, 2 trailer, 3 over */
} ExportStream;

static bytea *
new_chunk(size_t len, uint8 **data)
{
	bytea	   *b = (bytea *) palloc_extended(VARHDRSZ + len, MCXT_ALLOC_HUGE);

	SET_VARSIZE(b, VARHDRSZ + len);
	*data = (uint8 *) VARDATA(b);
	return b;
}

Datum
cpht_export(PG_FUNCTION_ARGS)
{
	FuncCallContext *fctx;
	ExportStream *st;
	bytea	   *chunk = NULL;
	uint8	   *data;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (SRF_IS_FIRSTCALL())
	{
		TupleDesc	desc;
		MemoryContext old;

		fctx = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(fctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "cpht_export must return a row type");
		fctx->tuple_desc = BlessTupleDesc(desc);
		st = palloc0(sizeof(ExportStream));
		/* a chunk of encoded keys beside the piece */
		st->reader = reader_begin(fctx->multi_call_memory_ctx, PG_GETARG_INT32(0),
								  &st->header, sizeof(uint64));
		INIT_CRC32C(st->crc);
		fctx->user_fctx = st;
		MemoryContextSwitchTo(old);
	}
	fctx = SRF_PERCALL_SETUP();
	st = fctx->user_fctx;

	if (st->phase == 0)
	{
		chunk = new_chunk(CPHT_KEY_FILE_HEADER, &data);
		cpht_key_file_header_write(&st->header, data);
		COMP_CRC32C(st->crc, data, CPHT_KEY_FILE_HEADER);
		st->phase = 1;
	}
	else if (st->phase == 1)
	{
		size_t		n = reader_next(st->reader);

		if (n > 0)
		{
			chunk = new_chunk(n * sizeof(uint64), &data);
			cpht_key_file_encode(st->reader->keys, n, data);
			COMP_CRC32C(st->crc, data, n * sizeof(uint64));
		}
		else
			st->phase = 2;
	}
	if (chunk == NULL && st->phase == 2)
	{
		pg_crc32c	crc = st->crc;

		FIN_CRC32C(crc);
		chunk = new_chunk(CPHT_KEY_FILE_TRAILER, &data);
		cpht_key_file_trailer_write(crc, data);
		st->phase = 3;
	}
	if (chunk == NULL)
		SRF_RETURN_DONE(fctx);

	values[0] = Int64GetDatum(++st->seq);
	values[1] = PointerGetDatum(chunk);
	SRF_RETURN_NEXT(fctx, HeapTupleGetDatum(heap_form_tuple(fctx->tuple_desc, values, nulls)));
}

/* ---- server files -------------------------------------------------------- */

void
cpht_key_file_check_role(bool write)
{
	Oid			role = write ? ROLE_PG_WRITE_SERVER_FILES : ROLE_PG_READ_SERVER_FILES;

	if (!has_privs_of_role(GetUserId(), role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg(write ? "permission denied to export a cpht table to a server file" :
						"permission denied to import a cpht table from a server file"),
				 errdetail("Only roles with privileges of the \"%s\" role may %s files on the server.",
						   write ? "pg_write_server_files" : "pg_read_server_files",
						   write ? "write" : "read"),
				 errhint(write ? "Use cpht_export(handle), which streams the same bytes to the client." :
						 "Use cpht_import_agg(handle, chunk ORDER BY seq) on the rows of an export.")));
}

void
cpht_key_file_check_path(const char *path, bool write)
{
	if (!is_absolute_path(path))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("relative path not allowed for %s",
						write ? "cpht_export_file" : "cpht_import_file"),
				 errdetail("A server file is named by its absolute path, as for COPY to a file; a relative path would name a file in the data directory."),
				 errhint("Give the file's absolute path.")));
}

static void
write_all(FILE *f, const void *data, size_t len, const char *path)
{
	if (len > 0 && fwrite(data, 1, len, f) != len)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", path)));
}

/*
 * cpht_export_file(handle, path): the keys into a new file at path (an
 * absolute one, as for COPY to a file), written to a
 * temporary file beside it, flushed and renamed, so that path holds a
 * whole export or what it held before.  Returns the number of keys.
 */
Datum
cpht_export_file(PG_FUNCTION_ARGS)
{
	int32		handle = PG_GETARG_INT32(0);
	char	   *path = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *temp;
	MemoryContext cxt;
	FILE	   *volatile f = NULL;
	uint64		count = 0;

	cpht_key_file_check_role(true);
	cpht_key_file_check_path(path, true);
	temp = psprintf("%s.cpht-tmp.%d", path, MyProcPid);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "cpht export", ALLOCSET_DEFAULT_SIZES);

	PG_TRY();
	{
		CphtKeyFileHeader header;
		KeyReader  *r = reader_begin(cxt, handle, &header, sizeof(uint64));
		uint8	   *buf = MemoryContextAllocHuge(cxt, Max(r->max * sizeof(uint64), CPHT_KEY_FILE_HEADER));
		pg_crc32c	crc;
		size_t		n;

		f = AllocateFile(temp, PG_BINARY_W);
		if (f == NULL)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create file \"%s\": %m", temp)));
		INIT_CRC32C(crc);
		cpht_key_file_header_write(&header, buf);
		COMP_CRC32C(crc, buf, CPHT_KEY_FILE_HEADER);
		write_all(f, buf, CPHT_KEY_FILE_HEADER, temp);
		while ((n = reader_next(r)) > 0)
		{
			cpht_key_file_encode(r->keys, n, buf);
			COMP_CRC32C(crc, buf, n * sizeof(uint64));
			write_all(f, buf, n * sizeof(uint64), temp);
		}
		FIN_CRC32C(crc);
		cpht_key_file_trailer_write(crc, buf);
		write_all(f, buf, CPHT_KEY_FILE_TRAILER, temp);
		if (fflush(f) != 0 || pg_fsync(fileno(f)) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not write file \"%s\": %m", temp)));
		count = header.count;
		if (FreeFile(f) != 0)
		{
			f = NULL;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not close file \"%s\": %m", temp)));
		}
		f = NULL;
		durable_rename(temp, path, ERROR);
	}
	PG_CATCH();
	{
		if (f != NULL)
			FreeFile(f);
		(void) unlink(temp);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextDelete(cxt);
	PG_RETURN_INT64((int64) count);
}
