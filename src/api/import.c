/*
 * import.c — keys of an export into an existing table, as find-or-put:
 * keys the table already holds stay, the others are put, and the number
 * put is returned.  cpht_import_file(handle, path) reads a server file
 * (roles with the privileges of pg_read_server_files);
 * cpht_import_agg(handle, chunk) takes the chunks of a stream in order
 * (ORDER BY seq), split anywhere.
 *
 * The keys go to the table in batches of cpht.batch_size with the checks
 * and transaction handling of cpht_put: on a transactional table they
 * belong to the caller's transaction and go with its rollback; a key
 * outside the table's key_bits is 22003.  Any table kind, key_bits and
 * device takes any export.
 *
 * A file is read twice: first to check its size and CRC, so that a
 * damaged file changes no table, then to put its keys (checking the CRC
 * again, in case the file changed in between).  A stream is checked as it
 * goes: its full batches are put before its CRC is known, so a damaged
 * stream fails at its end, which a transactional table undoes; on a table
 * with transactional => false the batches already put stay.
 */
#include "postgres.h"

#include <sys/stat.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "errors.h"
#include "api/export.h"
#include "session/session.h"
#include "api/key_file.h"
#include "memcap.h"
#include "stream/stream.h"

PG_FUNCTION_INFO_V1(cpht_import_file);
PG_FUNCTION_INFO_V1(cpht_import_agg_step);
PG_FUNCTION_INFO_V1(cpht_import_agg_final);

/* find-or-put of one batch: how many keys were new */
static uint64
put_batch(int32 handle, const uint64 *keys, size_t n)
{
	CphtHandleEntry *h = cpht_handles_use(handle);
	uint64		inserted = 0;

	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		cpht_check_key(keys[i], h->key_bits);
	CHECK_FOR_INTERRUPTS();
	cpht_txn_before_write(h);
	cpht_memory_sync();
	cpht_check_call(cpht_tableref_put(cpht_handle_table(h), keys, n, &inserted), h->handle,
					cpht_tableref_error(cpht_handle_table(h)), "No key of this batch was stored.");
	return inserted;
}

/* ---- cpht_import_file ---------------------------------------------------- */

static void
read_exact(FILE *f, void *buf, size_t len, const char *path, const char *source)
{
	if (len > 0 && fread(buf, 1, len, f) != len)
	{
		if (ferror(f))
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", path)));
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("cpht key export %s is damaged", source),
				 errdetail("It ends before the keys and trailer its header announces.")));
	}
}

/*
 * One pass over the keys of an open file positioned after its header:
 * their CRC (seeded with the header's), and, when handle is not 0, the
 * keys put into that table.
 */
static pg_crc32c
file_pass(FILE *f, const uint8 *header_bytes, uint64 count, uint8 *buf, uint64 *keys,
		  size_t max, int32 handle, uint64 *inserted, const char *path, const char *source)
{
	pg_crc32c	crc;
	uint8		trailer[CPHT_KEY_FILE_TRAILER];

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, header_bytes, CPHT_KEY_FILE_HEADER);
	for (uint64 done = 0; done < count;)
	{
		size_t		n = (size_t) Min((uint64) max, count - done);

		CHECK_FOR_INTERRUPTS();
		read_exact(f, buf, n * sizeof(uint64), path, source);
		COMP_CRC32C(crc, buf, n * sizeof(uint64));
		if (handle != 0)
		{
			cpht_key_file_decode(buf, n, keys);
			*inserted += put_batch(handle, keys, n);
		}
		done += n;
	}
	FIN_CRC32C(crc);
	read_exact(f, trailer, CPHT_KEY_FILE_TRAILER, path, source);
	cpht_key_file_trailer_check(trailer, crc, source);
	return crc;
}

Datum
cpht_import_file(PG_FUNCTION_ARGS)
{
	int32		handle = PG_GETARG_INT32(0);
	char	   *path = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *source;
	FILE	   *f;
	struct stat st;
	uint8		header_bytes[CPHT_KEY_FILE_HEADER];
	CphtKeyFileHeader header;
	uint64		size;
	uint64		inserted = 0;
	size_t		max = (size_t) cpht_batch_size;
	uint8	   *buf;
	uint64	   *keys;
	uint64		reserved;

	cpht_key_file_check_role(false);
	cpht_key_file_check_path(path, false);
	buf = palloc_extended(max * sizeof(uint64), MCXT_ALLOC_HUGE);
	keys = palloc_extended(max * sizeof(uint64), MCXT_ALLOC_HUGE);
	(void) cpht_handles_use(handle);
	source = psprintf("file \"%s\"", path);
	f = AllocateFile(path, PG_BINARY_R);
	if (f == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\" for reading: %m", path)));
	if (fstat(fileno(f), &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	if (S_ISDIR(st.st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is a directory", path)));
	if ((uint64) st.st_size < CPHT_KEY_FILE_HEADER)
	{
		/* too short for a header: a foreign file, or a torn one */
		memset(header_bytes, 0, sizeof(header_bytes));
		read_exact(f, header_bytes, (size_t) st.st_size, path, source);
		if (st.st_size < 8 || memcmp(header_bytes, "CPHTKEYS", 8) != 0)
			cpht_key_file_header_read(header_bytes, &header, source);
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("cpht key export %s is damaged", source),
				 errdetail("It ends inside its header, after %d bytes.", (int) st.st_size)));
	}
	read_exact(f, header_bytes, CPHT_KEY_FILE_HEADER, path, source);
	cpht_key_file_header_read(header_bytes, &header, source);
	size = cpht_key_file_size(header.count, source);
	if ((uint64) st.st_size != size)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("cpht key export %s is damaged", source),
				 errdetail("It has " UINT64_FORMAT " bytes, but its header announces " UINT64_FORMAT " keys, which make " UINT64_FORMAT " bytes.",
						   (uint64) st.st_size, header.count, size)));

	reserved = (uint64) max * 2 * sizeof(uint64);
	cpht_memory_reserve(reserved, "cpht import buffer");
	PG_TRY();
	{
		/* check the whole file before the table sees a key */
		(void) file_pass(f, header_bytes, header.count, buf, keys, max, 0, NULL, path, source);
		if (fseeko(f, CPHT_KEY_FILE_HEADER, SEEK_SET) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not seek in file \"%s\": %m", path)));
		(void) file_pass(f, header_bytes, header.count, buf, keys, max, handle, &inserted, path, source);
	}
	PG_FINALLY();
	{
		cpht_memory_release(reserved);
	}
	PG_END_TRY();
	FreeFile(f);
	pfree(buf);
	pfree(keys);
	PG_RETURN_INT64((int64) inserted);
}

/* ---- cpht_import_agg ----------------------------------------------------- */

typedef struct ImportAggState
{
	int32		handle;
	uint64		consumed;		/* bytes of the export taken so far */
	uint8		header_bytes[CPHT_KEY_FILE_HEADER];
	CphtKeyFileHeader header;
	uint64		size;			/* of the whole export, once the header is in */
	uint8		partial[sizeof(uint64)];	/* bytes of a key split by chunks */
	uint8		trailer[CPHT_KEY_FILE_TRAILER];
	pg_crc32c	crc;
	uint64	   *keys;			/* a batch being collected */
	size_t		n;
	size_t		max;
	uint64		inserted;
	uint64		reserved;
	MemoryContextCallback release;
} ImportAggState;

static void
import_agg_release(void *arg)
{
	ImportAggState *s = arg;

	cpht_memory_release(s->reserved);
	s->reserved = 0;
}

static const char *const stream_source = "stream";

/* Takes len bytes of the export. */
static void
import_bytes(ImportAggState *s, const uint8 *data, size_t len)
{
	while (len > 0)
	{
		uint64		at = s->consumed;
		size_t		take;

		if (at < CPHT_KEY_FILE_HEADER)
		{
			take = (size_t) Min((uint64) len, CPHT_KEY_FILE_HEADER - at);
			memcpy(s->header_bytes + at, data, take);
			if (at + take == CPHT_KEY_FILE_HEADER)
			{
				cpht_key_file_header_read(s->header_bytes, &s->header, stream_source);
				s->size = cpht_key_file_size(s->header.count, stream_source);
				COMP_CRC32C(s->crc, s->header_bytes, CPHT_KEY_FILE_HEADER);
			}
		}
		else if (at < s->size - CPHT_KEY_FILE_TRAILER)
		{
			uint64		body_at = at - CPHT_KEY_FILE_HEADER;
			size_t		in_key = (size_t) (body_at % sizeof(uint64));

			take = (size_t) Min((uint64) len, s->size - CPHT_KEY_FILE_TRAILER - at);
			if (in_key > 0 || take < sizeof(uint64))
			{
				/* a key split between chunks */
				take = Min(take, sizeof(uint64) - in_key);
				memcpy(s->partial + in_key, data, take);
				if (in_key + take == sizeof(uint64))
					cpht_key_file_decode(s->partial, 1, &s->keys[s->n++]);
			}
			else
			{
				size_t		whole = Min(take / sizeof(uint64), s->max - s->n);

				take = whole * sizeof(uint64);
				cpht_key_file_decode(data, whole, s->keys + s->n);
				s->n += whole;
			}
			COMP_CRC32C(s->crc, data, take);
			if (s->n == s->max)
			{
				s->inserted += put_batch(s->handle, s->keys, s->n);
				s->n = 0;
			}
		}
		else if (at < s->size)
		{
			take = (size_t) Min((uint64) len, s->size - at);
			memcpy(s->trailer + (at - (s->size - CPHT_KEY_FILE_TRAILER)), data, take);
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("cpht key export stream is damaged"),
					 errdetail("It goes on after the trailer that ends the keys its header announces."),
					 errhint("Give the chunks of one export, each once, in seq order: cpht_import_agg(handle, chunk ORDER BY seq).")));
		s->consumed += take;
		data += take;
		len -= take;
	}
}

Datum
cpht_import_agg_step(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext;
	ImportAggState *s;

	if (!AggCheckCallContext(fcinfo, &aggcontext))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht_import_agg_step called in a non-aggregate context")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("handle must not be null")));
	if (PG_ARGISNULL(0))
	{
		CphtHandleEntry *h = cpht_handles_use(PG_GETARG_INT32(1));

		s = MemoryContextAllocZero(aggcontext, sizeof(ImportAggState));
		s->handle = h->handle;
		s->max = (size_t) cpht_batch_size;
		s->reserved = (uint64) s->max * sizeof(uint64);
		cpht_memory_reserve(s->reserved, "cpht import buffer");
		s->release.func = import_agg_release;
		s->release.arg = s;
		MemoryContextRegisterResetCallback(aggcontext, &s->release);
		s->keys = MemoryContextAllocHuge(aggcontext, s->max * sizeof(uint64));
		s->size = PG_UINT64_MAX;
		INIT_CRC32C(s->crc);
	}
	else
	{
		s = (ImportAggState *) PG_GETARG_POINTER(0);
		if (PG_GETARG_INT32(1) != s->handle)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cpht_import_agg must get the same handle in every row of a group")));
	}
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a chunk of a cpht key export must not be null")));
	{
		bytea	   *chunk = PG_GETARG_BYTEA_PP(2);

		import_bytes(s, (const uint8 *) VARDATA_ANY(chunk), VARSIZE_ANY_EXHDR(chunk));
	}
	PG_RETURN_POINTER(s);
}

Datum
cpht_import_agg_final(PG_FUNCTION_ARGS)
{
	ImportAggState *s;
	pg_crc32c	crc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("cpht_import_agg got no chunks"),
				 errdetail("An export has at least a header and a trailer."),
				 errhint("Check the query that feeds it: cpht_import_agg(handle, chunk ORDER BY seq) FROM the rows of cpht_export().")));
	s = (ImportAggState *) PG_GETARG_POINTER(0);
	if (s->consumed < CPHT_KEY_FILE_HEADER || s->consumed < s->size)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("cpht key export stream is damaged"),
				 errdetail("It ends after " UINT64_FORMAT " bytes, before the keys and trailer its header announces.",
						   s->consumed),
				 errhint("Give the chunks of one export, each once, in seq order: cpht_import_agg(handle, chunk ORDER BY seq).")));
	crc = s->crc;
	FIN_CRC32C(crc);
	cpht_key_file_trailer_check(s->trailer, crc, stream_source);
	s->inserted += put_batch(s->handle, s->keys, s->n);
	s->n = 0;
	PG_RETURN_INT64((int64) s->inserted);
}
