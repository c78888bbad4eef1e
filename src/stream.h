/*
 * stream.h — find-or-put over streams of rows instead of one array: the
 * cpht_fop_agg aggregate (stream.c) and the cpht_fop_rows set-returning
 * function (fop_rows.c), and the stream of batches both send.
 */
#ifndef CPHT_STREAM_H
#define CPHT_STREAM_H

#include "cpht_table.h"
#include "guc.h"
#include "handles.h"


/*
 * One stream of batches into a table, with the settings it was opened
 * with: however a query changes cpht.batch_size or cpht.batch_memory while
 * it runs, a stream keeps these.
 */
typedef struct Stream
{
	int32		handle;
	int			key_bits;
	int			batch_keys;		/* cpht.batch_size when opened */
	uint64		batch_bytes;	/* cpht.batch_memory when opened, in bytes */
	uint64		reserved;		/* bytes counted against cpht.max_memory */
	CphtAccessStream *stream;
	MemoryContextCallback closer;
	/* cpht.trace: the table calls of the batches collected so far */
	uint64		batches;
	uint64		keys;
	cpht_call_times times;
} Stream;

/*
 * Opens a stream into a handle's table (private or shared), living as long as cxt.  Counts against
 * cpht.max_memory (53400 beyond it) the kernels' batch buffers and
 * caller_bytes_per_key for each key of a batch that the caller holds.
 */
extern Stream *cpht_stream_begin(MemoryContext cxt, int32 handle,
								 uint64 caller_bytes_per_key);

/* Counts more of the caller's memory against cpht.max_memory, or gives it
 * back; whatever is still counted is given back when the stream closes. */
extern void cpht_stream_reserve(Stream *st, uint64 bytes, const char *what);
extern void cpht_stream_release(Stream *st, uint64 bytes);

/*
 * Hands a batch of n keys (0 <= n <= batch_keys) to the table and collects
 * the stream's previous one: its per-key status through status and nstatus
 * when asked for, and how many keys it inserted as the result.
 */
extern uint64 cpht_stream_swap(Stream *st, const uint64 *keys, int n,
							   const uint8 **status, size_t *nstatus);

/* cpht.trace: a NOTICE summing the table calls of a stream's batches. */
extern void cpht_stream_report(Stream *st, const char *fn);

/* Rejects a key outside the table's key_bits, as the array functions do. */
extern void cpht_stream_check_key(uint64 key, int key_bits);

#endif							/* CPHT_STREAM_H */
