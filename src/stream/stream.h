/*
 * stream/stream.h — the door of stream/: keys into a table in batches.
 * batches.c holds the stream of batches (CphtBatchStream); the aggregates
 * cpht_fop_agg (fop_agg.c) and cpht_fop_new_agg (fop_new_agg.c) send their
 * keys through one, and so does the cpht_fop_rows set-returning function
 * (api/fop_rows.c); a relation's key column is fed into a stream by
 * relfeed.c (the feed), relation.c (which relation, column and route),
 * heap_feed.c (our own parallel heap scan) and query_feed.c (a query);
 * progress.c reports long calls.
 *
 * Who: cpht.c, api/ and plan/ may include it (test/check-layout.sh);
 * plan/ recognises the aggregates by their transition functions.
 *
 * Concurrency: stream/'s code runs on the calling process's own thread,
 * in a backend or in a parallel worker: the aggregates' steps run in
 * parallel workers on the leader's shared tables (a worker registers the
 * leader's handle as a stream opens, session/session.h).  A stream keeps its
 * batches and counts them against cpht.max_memory (ERROR 53400 beyond
 * it); a batch of a table in this backend runs on a kernels' helper
 * thread while the caller collects the next (tableref/tableref.h).  The
 * heap feed launches parallel workers of its own (a ParallelContext):
 * each opens the relation with AccessShareLock and sends its rows through
 * a message queue; the leader makes every table call, with the caller's
 * handle and transaction, and raises a worker's ERROR as its own.
 * query_feed.c reads through SPI.  progress.c writes this backend's own
 * activity entry (pgstat_progress_*).  stream/ takes no LWLock or
 * spinlock of cpht's itself; the layers below take theirs.  Everything may
 * raise ERROR; a cancel stops a long call between batches or inside the
 * table's call.
 */
#ifndef CPHT_STREAM_H
#define CPHT_STREAM_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/rel.h"

#include "cpht_table.h"
#include "guc.h"
#include "session/session.h"

/*
 * One stream of batches into a table, with the settings it was opened
 * with: however a query changes cpht.batch_size or cpht.batch_memory while
 * it runs, a stream keeps these.  It holds the memory it counts against
 * cpht.max_memory and runs over the table's own stream of the placement
 * (tableref's CphtTableRefStream, which for a table in this backend is the
 * kernels' cpht_stream).
 */
typedef struct CphtBatchStream
{
	int32		handle;
	int			key_bits;
	int			batch_keys;		/* cpht.batch_size when opened */
	uint64		batch_bytes;	/* cpht.batch_memory when opened, in bytes */
	uint64		reserved;		/* bytes counted against cpht.max_memory */
	CphtTableRefStream *stream;
	MemoryContextCallback closer;
	/* cpht.trace: the table calls of the batches collected so far */
	uint64		batches;
	uint64		keys;
	cpht_call_times times;
	/* and this process's side of them: handing each batch over (a shared
	 * table's keys copied into the worker's window) and waiting for its
	 * answer, in ms */
	double		hand_over_ms;
	double		wait_ms;
	double		window_split_at_begin[CPHT_WINDOW_SPLIT_PARTS];	/* cpht_remote_window_split */
} CphtBatchStream;

/*
 * Opens a stream into a handle's table (private or shared), living as long as cxt.  Counts against
 * cpht.max_memory (53400 beyond it) the kernels' batch buffers and
 * caller_bytes_per_key for each key of a batch that the caller holds.
 */
extern CphtBatchStream *cpht_batch_stream_begin(MemoryContext cxt, int32 handle,
												uint64 caller_bytes_per_key);

/* Counts more of the caller's memory against cpht.max_memory, or gives it
 * back; whatever is still counted is given back when the stream closes. */
extern void cpht_batch_stream_reserve(CphtBatchStream *st, uint64 bytes, const char *what);
extern void cpht_batch_stream_release(CphtBatchStream *st, uint64 bytes);

/*
 * Hands a batch of n keys (0 <= n <= batch_keys) to the table and collects
 * the stream's previous one: its per-key status through status and nstatus
 * when asked for, and how many keys it inserted as the result.
 */
extern uint64 cpht_batch_stream_swap(CphtBatchStream *st, const uint64 *keys, int n,
									 const uint8 **status, size_t *nstatus);

/*
 * What every stream of this backend sent so far: keys, the new ones, the
 * time in the table's calls (ms).  plan/call_node.c's EXPLAIN ANALYZE
 * takes the difference over a call.
 */
typedef struct CphtBatchStreamTotals
{
	uint64		keys;
	uint64		new_keys;
	double		table_ms;
} CphtBatchStreamTotals;

extern void cpht_batch_stream_totals(CphtBatchStreamTotals *out);

/* cpht.trace: a NOTICE summing the table calls of a stream's batches. */
extern void cpht_batch_stream_report(CphtBatchStream *st, const char *fn);

/* Rejects a key outside the table's key_bits, as the array functions do. */
extern void cpht_check_key(uint64 key, int key_bits);

/* The transition function of the cpht_fop_agg aggregate (fop_agg.c): the
 * planner hook (plan/hooks.c) recognises the aggregate by it. */
extern PGDLLEXPORT Datum cpht_fop_agg_step(PG_FUNCTION_ARGS);
/* ... and its final function, the count of new keys (relation_agg.c
 * rewrites only an aggregate that ends in it) */
extern PGDLLEXPORT Datum cpht_fop_agg_final(PG_FUNCTION_ARGS);
/* fop_new_agg.c: the step of cpht_fop_new_agg, which the planner hooks
 * treat as cpht_fop_agg's */
extern PGDLLEXPORT Datum cpht_fop_new_agg_step(PG_FUNCTION_ARGS);

/*
 * A relation's key column read into a table's stream of batches (the feed:
 * relfeed.c), by a parallel heap scan of cpht's own (heap_feed.c) or by a
 * query (query_feed.c), as relation.c decides:
 * the funnel under cpht_fop_relation and cpht_fop_new_relation
 * (api/fop_relation.c) and cpht_insert_new (api/insert_new.c).
 */

typedef struct RelFeed RelFeed;

/* Rows a scan collects before it hands them on: a worker's message to the
 * leader, the leader's own rows (RelFeed.chunk). */
#define CPHT_RELSCAN_CHUNK_ROWS 65536

/*
 * Called with each batch once the table has answered it: keys[i] had
 * status[i]; tids[i] is the row's tid (packed as by cpht_relscan_tid)
 * when the feed carries tids, else tids is NULL.
 */
typedef void (*RelFeedTake) (RelFeed *f, const uint64 *keys, const uint64 *tids,
							 const uint8 *status, size_t n);

/*
 * The leader's side: two batches of the table's stream, since the statuses
 * of a batch come back when the next one is handed over.
 */
struct RelFeed
{
	CphtBatchStream *stream;
	bool		with_tids;		/* rows are (key, tid) rather than keys */
	bool		null_keys_fail; /* a NULL key is 22004 rather than skipped */
	uint64	   *keys[2];
	uint64	   *tids[2];		/* NULL without with_tids */
	int			n;				/* rows in batch cur */
	int			cur;
	uint64		inserted;		/* keys the table reported new */
	RelFeedTake take;			/* NULL: count only */
	void	   *arg;			/* the caller's, for take */
	/* rows of the leader's own scan not yet in a batch
	 * (CPHT_RELSCAN_CHUNK_ROWS of one word, or two with tids) */
	uint64	   *chunk;
	int			chunk_rows;
};

/* A tid packed into 48 bits: block number, then offset; packed tids sort
 * in the order of the heap. */
static inline uint64
cpht_relscan_tid(ItemPointer tid)
{
	return ((uint64) ItemPointerGetBlockNumberNoCheck(tid) << 16) |
		ItemPointerGetOffsetNumberNoCheck(tid);
}

static inline void
cpht_relscan_set_tid(ItemPointer tid, uint64 packed)
{
	ItemPointerSet(tid, (BlockNumber) (packed >> 16), (OffsetNumber) (packed & 0xFFFF));
}

/* A key of typlen bytes (8, 4 or 2) as a bigint. */
static inline uint64
cpht_relscan_key_value(Datum d, int16 typlen)
{
	return (uint64) (typlen == 8 ? DatumGetInt64(d) :
					 typlen == 4 ? (int64) DatumGetInt32(d) : (int64) DatumGetInt16(d));
}

/* relfeed.c: opens the feed's stream into handle's table (settings read now). */
extern void cpht_relfeed_begin(RelFeed *f, int32 handle, bool with_tids,
							   bool null_keys_fail, RelFeedTake take, void *arg);

/* Adds n rows (of one word, or two with tids) to the batches, handing each
 * full batch to the table (whose statuses for the batch before it go to
 * take). */
extern void cpht_relfeed_put(RelFeed *f, const uint64 *rows, int n);

/* Sends the last partial batch and collects it; under cpht.trace, then
 * reports the feed's stream as fn's (cpht_batch_stream_report). */
extern void cpht_relfeed_finish(RelFeed *f, const char *fn);

/* relation.c: the key column of rel (bigint, or with bigint_only false also integer
 * or smallint, or a domain over one; 42703, 42804 otherwise) and its
 * length in *typlen. */
extern AttrNumber cpht_relscan_key_column(Relation rel, const char *key_column,
										  bool bigint_only, int16 *typlen);

/* 42501 unless the role may read the column. */
extern void cpht_relscan_check_select(Relation rel, AttrNumber attno);

/* Whether cpht_relscan_scan reads exactly what SELECT * FROM rel would: a
 * plain heap table, no children, no row-level security for the caller. */
extern bool cpht_relscan_reads_all(Relation rel);

/* Parallel workers for a scan of rel, as the planner counts them for a
 * sequential scan; 0 in a parallel operation or for a temporary table. */
extern int	cpht_relscan_workers(Relation rel);

/* heap_feed.c: every row of rel (as cpht_relscan_reads_all allows) into the feed, by a
 * parallel scan under the active snapshot. */
extern void cpht_relscan_scan(RelFeed *f, Relation rel, AttrNumber attno, int16 typlen);

/* query_feed.c: every non-NULL key of SELECT key_column FROM rel into the feed (keys
 * only), under a new snapshot (see the file's header). */
extern void cpht_relscan_query(RelFeed *f, Relation rel, const char *key_column, int16 typlen);

/*
 * progress.c: the progress of a long call, for cpht_stat_progress (api/),
 * in this backend's entry of PostgreSQL's activity array, under a command
 * number of cpht's own (PostgreSQL 15 has no progress command for
 * extensions).  begin: false, reporting nothing, when the backend reports
 * a command already (this call's caller, or COPY); rel, where not NULL,
 * is the relation read, whose row estimate is the keys known.  Every batch
 * of a stream counts its keys and new keys (cpht_batch_stream_swap).  end(began)
 * with begin's result; an abort ends the report too.
 */
#define CPHT_PROGRESS_COMMAND 0x6370	/* "cp" */

/* the entry's parameters */
#define CPHT_PROGRESS_OP		0
#define CPHT_PROGRESS_PHASE		1
#define CPHT_PROGRESS_HANDLE	2
#define CPHT_PROGRESS_KEYS_DONE 3
#define CPHT_PROGRESS_KEYS_KNOWN 4
#define CPHT_PROGRESS_NEW_KEYS	5
#define CPHT_PROGRESS_ROWS_DONE 6
#define CPHT_PROGRESS_ROWS_KNOWN 7

typedef enum CphtProgressOp
{
	CPHT_PROGRESS_FOP_RELATION = 1,
	CPHT_PROGRESS_FOP_NEW_RELATION,
	CPHT_PROGRESS_INSERT_NEW,
	CPHT_PROGRESS_FOP_ROWS
} CphtProgressOp;

typedef enum CphtProgressPhase
{
	CPHT_PHASE_SENDING_KEYS = 1,
	CPHT_PHASE_SORTING_ROWS,
	CPHT_PHASE_INSERTING_ROWS
} CphtProgressPhase;

extern bool cpht_progress_begin(CphtProgressOp op, int32 handle, Relation rel);
/* rows_known: the rows the phase will go through, -1 when not known */
extern void cpht_progress_phase(CphtProgressPhase phase, int64 rows_known);
extern void cpht_progress_sent(uint64 keys, uint64 new_keys);
/* A caller that counts the keys itself (the parallel new-keys node: its
 * workers' streams are not this backend's) sets the totals; the streams'
 * counts are then ignored until the report ends. */
extern void cpht_progress_set_sent(uint64 keys, uint64 new_keys);
extern void cpht_progress_rows(uint64 rows);
extern void cpht_progress_end(bool began);

#endif							/* CPHT_STREAM_H */
