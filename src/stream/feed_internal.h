/*
 * feed_internal.h — what the routes that read a relation's keys into a
 * feed share (private to stream/): the feed itself is relfeed.c, the
 * parallel heap scan heap_feed.c, the query route query_feed.c.
 */
#ifndef CPHT_FEED_INTERNAL_H
#define CPHT_FEED_INTERNAL_H

#include "stream/stream.h"

/* Rows a worker sends to the leader per message, and the size of the
 * feed's chunk (stream.h). */
#define CHUNK_ROWS CPHT_RELSCAN_CHUNK_ROWS

/*
 * Where a scan puts its rows: a buffer of cap rows of one word (the key)
 * or two (the key, the packed tid) that flush empties (a worker's into its
 * queue, the leader's into the table's batches).
 */
typedef struct RowSink
{
	uint64	   *words;
	int			n;				/* rows */
	int			cap;
	int			row_words;		/* 1 or 2 */
	void		(*flush) (struct RowSink *sink);
} RowSink;


/* The leader's rows written to a sink over the feed's chunk (relfeed.c). */
typedef struct LeaderSink
{
	RowSink		sink;
	RelFeed    *feed;
} LeaderSink;

extern void cpht_feed_leader_sink(LeaderSink *ls, RelFeed *f);

/*
 * Assigns the transaction ids a write on the handle's table carries, where
 * it needs them, before a route enters parallel mode, which cannot assign
 * them (relfeed.c).
 */
extern void cpht_feed_prepare_writes(int32 handle);

#endif							/* CPHT_FEED_INTERNAL_H */
