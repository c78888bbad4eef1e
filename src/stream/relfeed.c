/*
 * relfeed.c — the feed: a relation's rows (a key, or a key and its tid)
 * gathered in the leader into a table's stream of batches (stream.h,
 * RelFeed), whichever route reads them (heap_feed.c, query_feed.c,
 * plan/new_keys_exec.c), and the leader's sink over it.
 *
 * Invariants: the feed makes every table call itself, in the backend that
 * began it, with the caller's handle and transaction; a batch is handed to
 * the table when full and its statuses come back at the next hand-over
 * (two batches alternate), so a take callback sees every row's status once
 * and in the order the rows came.  Keys wider than the table's key width
 * raise before they reach it.
 *
 * Parallel mode forbids the leader to assign transaction ids, which a
 * write on a transactional shared table needs (the request carries the
 * xids, which other transactions wait for): cpht_feed_prepare_writes
 * assigns them before a route enters parallel mode.  (A durable table's
 * first write also puts the xid in WAL, which the leader may still do in
 * parallel mode.)
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "utils/memutils.h"

#include "client/client.h"
#include "session/session.h"
#include "stream/feed_internal.h"

void
cpht_relfeed_begin(RelFeed *f, int32 handle, bool with_tids, bool null_keys_fail,
				   RelFeedTake take, void *arg)
{
	int			row_words = with_tids ? 2 : 1;

	memset(f, 0, sizeof(*f));
	f->with_tids = with_tids;
	f->null_keys_fail = null_keys_fail;
	f->take = take;
	f->arg = arg;
	/* Settings are read here, once: the relation's scan may not change them. */
	f->stream = cpht_batch_stream_begin(CurrentMemoryContext, handle, 2 * sizeof(uint64) * row_words);
	for (int b = 0; b < 2; b++)
	{
		f->keys[b] = MemoryContextAllocHuge(CurrentMemoryContext,
											sizeof(uint64) * f->stream->batch_keys);
		if (with_tids)
			f->tids[b] = MemoryContextAllocHuge(CurrentMemoryContext,
												sizeof(uint64) * f->stream->batch_keys);
	}
	f->chunk = palloc(sizeof(uint64) * row_words * CHUNK_ROWS);
}

/* Hands batch cur to the table and gives the statuses of the batch before
 * it to take; the next rows go to the other batch. */
static void
feed_swap(RelFeed *f)
{
	const uint8 *status;
	size_t		nstatus;
	int			prev = 1 - f->cur;

	f->inserted += cpht_batch_stream_swap(f->stream, f->keys[f->cur], f->n,
										  f->take ? &status : NULL, &nstatus);
	if (f->take && nstatus > 0)
		f->take(f, f->keys[prev], f->with_tids ? f->tids[prev] : NULL, status, nstatus);
	f->cur = prev;
	f->n = 0;
}

void
cpht_relfeed_put(RelFeed *f, const uint64 *rows, int n)
{
	int			key_bits = f->stream->key_bits;

	while (n > 0)
	{
		int			take = Min(n, f->stream->batch_keys - f->n);
		uint64	   *keys = f->keys[f->cur] + f->n;

		if (f->with_tids)
		{
			uint64	   *tids = f->tids[f->cur] + f->n;

			for (int i = 0; i < take; i++)
			{
				keys[i] = rows[2 * i];
				tids[i] = rows[2 * i + 1];
			}
			rows += 2 * take;
		}
		else
		{
			memcpy(keys, rows, sizeof(uint64) * take);
			rows += take;
		}
		if (key_bits > 0 && key_bits < 64)
			for (int i = 0; i < take; i++)
				cpht_check_key(keys[i], key_bits);
		f->n += take;
		n -= take;
		if (f->n == f->stream->batch_keys)
			feed_swap(f);
	}
}

void
cpht_relfeed_finish(RelFeed *f, const char *fn)
{
	feed_swap(f);
	feed_swap(f);
	cpht_batch_stream_report(f->stream, fn);
}

static void
leader_flush(RowSink *sink)
{
	cpht_relfeed_put(((LeaderSink *) sink)->feed, sink->words, sink->n);
	sink->n = 0;
}

void
cpht_feed_leader_sink(LeaderSink *ls, RelFeed *f)
{
	ls->sink.words = f->chunk;
	ls->sink.n = 0;
	ls->sink.cap = CHUNK_ROWS;
	ls->sink.row_words = f->with_tids ? 2 : 1;
	ls->sink.flush = leader_flush;
	ls->feed = f;
}

/*
 * A write on a transactional shared table carries the xids of the top
 * transaction and of the current subtransaction, which parallel mode
 * cannot assign: they are assigned here, before it begins, as the first
 * write would assign them.  (In recovery such a write fails with 25006
 * whether or not parallel mode has begun.)
 */
void
cpht_feed_prepare_writes(int32 handle)
{
	CphtHandleEntry *h = cpht_handles_use(handle);

	if (!h->shared || !cpht_shared_ref(handle, NULL, NULL).transactional ||
		RecoveryInProgress())
		return;
	cpht_xact_end_note_write(GetTopTransactionId(), GetCurrentTransactionId());
}
