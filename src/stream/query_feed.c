/*
 * query_feed.c — the query route: a relation our own heap scan does not
 * read as a query would (row-level security, partitioned or inherited
 * tables, views, materialized views, foreign tables, other access methods;
 * relation.c tells) is read by running SELECT key_column FROM rel through
 * SPI into a receiver that fills the feed's batches (relfeed.c): the
 * executor applies the policies and expands the relation as for any
 * query, and may still plan that query in parallel.
 *
 * Invariants: keys only (no tids); rows with a NULL key are skipped.
 *
 * Snapshot.  The query reads under a new snapshot, as a query in a
 * volatile function does: SPI takes it after the relation's lock and the
 * locks of its children, any of which the call may have waited for behind
 * a transaction that wrote them, and so reads what that transaction
 * committed.  The caller's snapshot, taken before those waits, would miss
 * such rows in a child locked only by this query.  So cpht_fop_agg over a
 * whole table, which must read the statement's snapshot, is planned as a
 * call only for a relation the heap route reads (plan/relation_agg.c).
 *
 * Its locks are those of any query the caller runs; the
 * table calls stay in the leader, which may be in parallel mode, so the
 * transaction ids a write needs are assigned first.
 */
#include "postgres.h"

#include "executor/spi.h"
#include "executor/tuptable.h"
#include "tcop/dest.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "stream/feed_internal.h"

typedef struct FeedReceiver
{
	DestReceiver pub;
	LeaderSink	ls;
	int16		typlen;
} FeedReceiver;

static bool
feed_receive(TupleTableSlot *slot, DestReceiver *self)
{
	FeedReceiver *r = (FeedReceiver *) self;
	RowSink    *sink = &r->ls.sink;
	bool		isnull;
	Datum		d = slot_getattr(slot, 1, &isnull);

	if (!isnull)
	{
		sink->words[sink->n++] = cpht_relscan_key_value(d, r->typlen);
		if (sink->n == sink->cap)
			sink->flush(sink);
	}
	return true;
}

static void
feed_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
feed_shutdown(DestReceiver *self)
{
}

static void
feed_destroy(DestReceiver *self)
{
}

/*
 * Runs the query to its end into a receiver rather than through a cursor:
 * the planner may then run it in parallel (a cursor's query it never
 * does), and no rows are copied into tuple tables.
 */
void
cpht_relscan_query(RelFeed *f, Relation rel, const char *key_column, int16 typlen)
{
	FeedReceiver r;
	SPIExecuteOptions options;
	char	   *sql;
	int			rc;

	Assert(!f->with_tids);
	sql = psprintf("SELECT %s FROM %s", quote_identifier(key_column),
				   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											  RelationGetRelationName(rel)));
	memset(&r, 0, sizeof(r));
	r.pub.receiveSlot = feed_receive;
	r.pub.rStartup = feed_startup;
	r.pub.rShutdown = feed_shutdown;
	r.pub.rDestroy = feed_destroy;
	r.pub.mydest = DestNone;
	cpht_feed_leader_sink(&r.ls, f);
	r.typlen = typlen;

	/* a parallel plan calls the table from its leader in parallel mode */
	cpht_feed_prepare_writes(f->stream->handle);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	memset(&options, 0, sizeof(options));
	options.dest = (DestReceiver *) &r;
	rc = SPI_execute_extended(sql, &options);
	/* a query whose rows go to a DestNone receiver reports SPI_OK_UTILITY */
	if (rc != SPI_OK_UTILITY)
		elog(ERROR, "SPI_execute_extended of \"%s\" returned %s", sql, SPI_result_code_string(rc));
	SPI_finish();
	if (r.ls.sink.n > 0)
		r.ls.sink.flush(&r.ls.sink);
}
