/*
 * relscan.h — a relation's key column read into a table's stream of
 * batches, by a parallel heap scan of cpht's own or by a query (relscan.c):
 * the funnel under cpht_fop_relation and cpht_fop_new_relation
 * (fop_relation.c) and cpht_insert_new (insert_new.c).
 */
#ifndef CPHT_RELSCAN_H
#define CPHT_RELSCAN_H

#include "postgres.h"

#include "utils/rel.h"

#include "stream.h"

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
	Stream	   *stream;
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

/* Opens the feed's stream into handle's table (settings read now). */
extern void cpht_relfeed_begin(RelFeed *f, int32 handle, bool with_tids,
							   bool null_keys_fail, RelFeedTake take, void *arg);

/* Adds n rows (of one word, or two with tids) to the batches, handing each
 * full batch to the table (whose statuses for the batch before it go to
 * take). */
extern void cpht_relfeed_put(RelFeed *f, const uint64 *rows, int n);

/* Sends the last partial batch and collects it. */
extern void cpht_relfeed_finish(RelFeed *f);

/* The key column of rel (bigint, or with bigint_only false also integer
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

/* Every row of rel (as cpht_relscan_reads_all allows) into the feed, by a
 * parallel scan under the active snapshot. */
extern void cpht_relscan_scan(RelFeed *f, Relation rel, AttrNumber attno, int16 typlen);

/* Every non-NULL key of SELECT key_column FROM rel into the feed (keys
 * only). */
extern void cpht_relscan_query(RelFeed *f, Relation rel, const char *key_column, int16 typlen);

#endif							/* CPHT_RELSCAN_H */
