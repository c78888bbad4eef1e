/*
 * heap_feed.c — a relation's key column (and, for cpht_insert_new, each
 * row's tid) read into a table's stream of batches, with no function call
 * per row: the funnel under cpht_fop_relation, cpht_fop_new_relation
 * (api/fop_relation.c) and cpht_insert_new (api/insert_new.c).
 *
 * Fast path: a plain heap table without inheritance children and without
 * row-level security for the caller is read by a parallel heap scan of our
 * own (a ParallelContext, as PostgreSQL's parallel index builds use one).
 * Each worker scans the pages the shared scan gives it under the
 * statement's snapshot and sends its rows (a key, or a key and the row's
 * tid) to the leader through a message queue, in chunks of CHUNK_ROWS; the
 * leader drains the queues into batches and makes every table call
 * itself, with the caller's handle and transaction.  So any table works
 * (private or shared, in this backend or in the cpht worker, CPU or GPU),
 * and transactions mean what they mean for cpht_fop_agg.  The number of
 * workers follows the planner's rule for a scan of the relation
 * (cpht_relscan_workers); with none launched the leader scans alone, with the
 * same code.
 *
 * Parallel mode forbids the leader to assign transaction ids, which a
 * write on a transactional shared table needs (the request carries the
 * xids, which other transactions wait for): prepare_table_writes assigns
 * them before parallel mode begins.  (A durable table's first write also
 * puts the xid in WAL, which the leader may still do in parallel mode.)
 *
 * Other relations (row-level security, partitioned or inherited tables,
 * views, materialized views, foreign tables, other access methods) are read
 * by running SELECT key_column FROM rel through SPI into a receiver that
 * fills the same batches: the executor applies the policies and expands
 * the relation as for any query, and may still plan that query in
 * parallel.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/parallel.h"
#include "access/relscan.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "optimizer/cost.h"
#include "optimizer/paths.h"
#include "parser/parse_relation.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "tcop/dest.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "client/client.h"
#include "cpht_table.h"
#include "session/session.h"
#include "stream/stream.h"

/* Rows a worker sends to the leader per message (stream.h). */
#define CHUNK_ROWS CPHT_RELSCAN_CHUNK_ROWS

/* Each worker's queue holds a few chunks of (key, tid) rows, so a worker
 * scans on while the leader is in a table call. */
#define QUEUE_BYTES (4 * CHUNK_ROWS * 2 * sizeof(uint64))

/* Keys of our entries in the parallel context's table of contents. */
#define KEY_SHARED		UINT64CONST(0xC9E7000000000001)
#define KEY_SCAN		UINT64CONST(0xC9E7000000000002)
#define KEY_QUEUES		UINT64CONST(0xC9E7000000000003)

/* What every worker needs to know. */
typedef struct RelScanShared
{
	Oid			relid;
	AttrNumber	attno;
	int16		typlen;			/* of the key column's base type: 8, 4 or 2 */
	bool		with_tids;
	bool		null_keys_fail;
} RelScanShared;

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

/* ---- which relation, which column ---------------------------------------- */

/*
 * The key column of rel: 42703 when there is none, 42804 when it is not
 * bigint, integer or smallint (or a domain over one); its length in *typlen.
 */
AttrNumber
cpht_relscan_key_column(Relation rel, const char *key_column, bool bigint_only,
						int16 *typlen)
{
	AttrNumber	attno = attnameAttNum(rel, key_column, false);
	Oid			type;

	if (attno <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						key_column, RelationGetRelationName(rel))));
	type = getBaseType(TupleDescAttr(RelationGetDescr(rel), attno - 1)->atttypid);
	if (bigint_only && type != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("key column \"%s\" of relation \"%s\" is of type %s",
						key_column, RelationGetRelationName(rel), format_type_be(type)),
				 errdetail("The rows' keys are read from a column of type bigint, as cpht_fop_rows reads them.")));
	switch (type)
	{
		case INT8OID:
			*typlen = 8;
			break;
		case INT4OID:
			*typlen = 4;
			break;
		case INT2OID:
			*typlen = 2;
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("key column \"%s\" of relation \"%s\" is of type %s",
							key_column, RelationGetRelationName(rel), format_type_be(type)),
					 errdetail("Keys are read from a column of type bigint, integer or smallint."),
					 errhint("Run cpht_fop_agg over an expression that gives bigint instead.")));
	}
	return attno;
}

/* 42501 unless the role may read the column (by the table's or the
 * column's SELECT privilege). */
void
cpht_relscan_check_select(Relation rel, AttrNumber attno)
{
	Oid			relid = RelationGetRelid(rel);
	Oid			role = GetUserId();

	if (pg_class_aclcheck(relid, role, ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck(relid, attno, role, ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(rel->rd_rel->relkind),
					   RelationGetRelationName(rel));
}

/*
 * Whether our own scan reads exactly what SELECT * FROM rel would: a plain
 * heap table, no children to expand, no policy to apply.
 */
bool
cpht_relscan_reads_all(Relation rel)
{
	return rel->rd_rel->relkind == RELKIND_RELATION &&
		rel->rd_rel->relam == HEAP_TABLE_AM_OID &&
		!rel->rd_rel->relhassubclass &&
		/* RLS_NONE_ENV: policies exist, but none applies to this role now */
		check_enable_rls(RelationGetRelid(rel), InvalidOid, true) != RLS_ENABLED;
}

/*
 * Workers for a scan of rel, as the planner counts them for a sequential
 * scan (compute_parallel_worker): the parallel_workers storage parameter,
 * or one more worker each time the heap is three times larger than
 * min_parallel_table_scan_size, at most max_parallel_workers_per_gather.
 * None in a parallel operation already, or for a temporary table, whose
 * pages live in this backend.
 */
int
cpht_relscan_workers(Relation rel)
{
	int			workers;

	if (IsInParallelMode() || IsParallelWorker() || !IsUnderPostmaster ||
		max_parallel_workers_per_gather <= 0 || RelationUsesLocalBuffers(rel))
		return 0;
	workers = RelationGetParallelWorkers(rel, -1);
	if (workers < 0)
	{
		BlockNumber pages = RelationGetNumberOfBlocks(rel);
		int			threshold = Max(min_parallel_table_scan_size, 1);

		if (pages < (BlockNumber) min_parallel_table_scan_size)
			return 0;
		workers = 1;
		while (pages >= (BlockNumber) threshold * 3)
		{
			workers++;
			threshold *= 3;
			if (threshold > INT_MAX / 3)
				break;
		}
	}
	return Min(workers, max_parallel_workers_per_gather);
}

/* ---- scanning ------------------------------------------------------------ */

/* The error of a NULL key where the caller wants every row's key. */
static void
null_key_error(Relation rel, AttrNumber attno)
{
	const char *name = NameStr(TupleDescAttr(RelationGetDescr(rel), attno - 1)->attname);

	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("key column \"%s\" of relation \"%s\" is null in a row",
					name, RelationGetRelationName(rel)),
			 errhint("Filter out rows without a key, for example through a view with WHERE %s IS NOT NULL.",
					 quote_identifier(name))));
}

/* Every row of the scan into sink: its key (rows with a NULL key skipped,
 * or an error), and its tid where the sink takes two words a row. */
static void
scan_rows(Relation rel, TableScanDesc scan, AttrNumber attno, int16 typlen,
		  bool null_keys_fail, RowSink *sink)
{
	TupleTableSlot *slot = table_slot_create(rel, NULL);

	/* heap scans check for interrupts on every page */
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		d = slot_getattr(slot, attno, &isnull);
		uint64	   *row;

		if (isnull)
		{
			if (null_keys_fail)
				null_key_error(rel, attno);
			continue;
		}
		row = sink->words + (Size) sink->n * sink->row_words;
		row[0] = cpht_relscan_key_value(d, typlen);
		if (sink->row_words == 2)
			row[1] = cpht_relscan_tid(&slot->tts_tid);
		if (++sink->n == sink->cap)
			sink->flush(sink);
	}
	if (sink->n > 0)
		sink->flush(sink);
	ExecDropSingleTupleTableSlot(slot);
}

/* ---- workers ------------------------------------------------------------- */

typedef struct QueueSink
{
	RowSink		sink;
	shm_mq_handle *mqh;
} QueueSink;

static void
queue_flush(RowSink *sink)
{
	QueueSink  *qs = (QueueSink *) sink;

	/* A detached leader is ending with an error, which ends this worker. */
	(void) shm_mq_send(qs->mqh, sizeof(uint64) * sink->row_words * sink->n, sink->words,
					   false, true);
	sink->n = 0;
}

PGDLLEXPORT void cpht_relscan_worker(dsm_segment *seg, shm_toc *toc);

/* A parallel worker's entry: scans its share of the relation's pages and
 * sends the rows to the leader. */
void
cpht_relscan_worker(dsm_segment *seg, shm_toc *toc)
{
	RelScanShared *shared = shm_toc_lookup(toc, KEY_SHARED, false);
	ParallelTableScanDesc pscan = shm_toc_lookup(toc, KEY_SCAN, false);
	char	   *queues = shm_toc_lookup(toc, KEY_QUEUES, false);
	shm_mq	   *mq = (shm_mq *) (queues + (Size) ParallelWorkerNumber * QUEUE_BYTES);
	QueueSink	qs;
	Relation	rel;
	TableScanDesc scan;

	shm_mq_set_sender(mq, MyProc);
	qs.mqh = shm_mq_attach(mq, seg, NULL);
	qs.sink.row_words = shared->with_tids ? 2 : 1;
	qs.sink.words = palloc(sizeof(uint64) * qs.sink.row_words * CHUNK_ROWS);
	qs.sink.n = 0;
	qs.sink.cap = CHUNK_ROWS;
	qs.sink.flush = queue_flush;

	rel = table_open(shared->relid, AccessShareLock);
	scan = table_beginscan_parallel(rel, pscan);
	scan_rows(rel, scan, shared->attno, shared->typlen, shared->null_keys_fail, &qs.sink);
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	shm_mq_detach(qs.mqh);
}

/* ---- the leader: batches into the table --------------------------------- */

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
	f->stream = cpht_stream_begin(CurrentMemoryContext, handle, 2 * sizeof(uint64) * row_words);
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

	f->inserted += cpht_stream_swap(f->stream, f->keys[f->cur], f->n,
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
				cpht_stream_check_key(keys[i], key_bits);
		f->n += take;
		n -= take;
		if (f->n == f->stream->batch_keys)
			feed_swap(f);
	}
}

void
cpht_relfeed_finish(RelFeed *f)
{
	feed_swap(f);
	feed_swap(f);
}

/* The leader's own scan writes to a sink over the feed's chunk. */
typedef struct LeaderSink
{
	RowSink		sink;
	RelFeed    *feed;
} LeaderSink;

static void
leader_flush(RowSink *sink)
{
	cpht_relfeed_put(((LeaderSink *) sink)->feed, sink->words, sink->n);
	sink->n = 0;
}

static void
leader_sink_init(LeaderSink *ls, RelFeed *f)
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
static void
prepare_table_writes(int32 handle)
{
	CphtHandle *h = cpht_handles_use(handle);

	if (!h->shared || !cpht_shared_ref(handle, NULL, NULL).transactional ||
		RecoveryInProgress())
		return;
	cpht_xact_end_note_write(GetTopTransactionId(), GetCurrentTransactionId());
}

/* Reads the worker queues into the table until every worker is done. */
static void
drain_queues(RelFeed *f, shm_mq_handle **mqh, int nqueues)
{
	bool	   *done = palloc0(sizeof(bool) * nqueues);
	int			active = nqueues;
	Size		row_bytes = sizeof(uint64) * (f->with_tids ? 2 : 1);

	while (active > 0)
	{
		bool		got = false;

		/* a worker's error arrives as an interrupt and is raised here */
		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < nqueues; i++)
		{
			Size		nbytes;
			void	   *data;
			shm_mq_result res;

			if (done[i])
				continue;
			res = shm_mq_receive(mqh[i], &nbytes, &data, true);
			if (res == SHM_MQ_SUCCESS)
			{
				cpht_relfeed_put(f, (const uint64 *) data, (int) (nbytes / row_bytes));
				got = true;
			}
			else if (res == SHM_MQ_DETACHED)
			{
				done[i] = true;
				active--;
			}
		}
		if (!got && active > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1,
							 PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
	pfree(done);
}

void
cpht_relscan_scan(RelFeed *f, Relation rel, AttrNumber attno, int16 typlen)
{
	Snapshot	snapshot = GetActiveSnapshot();
	int			nworkers = cpht_relscan_workers(rel);
	ParallelContext *pcxt;
	RelScanShared *shared;
	ParallelTableScanDesc pscan;
	Size		pscan_size;
	char	   *queues = NULL;
	shm_mq_handle **mqh = NULL;
	TableScanDesc scan;
	LeaderSink	ls;

	leader_sink_init(&ls, f);
	if (nworkers == 0)
	{
		scan = table_beginscan(rel, snapshot, 0, NULL);
		scan_rows(rel, scan, attno, typlen, f->null_keys_fail, &ls.sink);
		table_endscan(scan);
		return;
	}

	prepare_table_writes(f->stream->handle);
	EnterParallelMode();
	pcxt = CreateParallelContext("cpht", "cpht_relscan_worker", nworkers);
	pscan_size = table_parallelscan_estimate(rel, snapshot);
	shm_toc_estimate_chunk(&pcxt->estimator, sizeof(RelScanShared));
	shm_toc_estimate_chunk(&pcxt->estimator, pscan_size);
	shm_toc_estimate_chunk(&pcxt->estimator, mul_size(QUEUE_BYTES, nworkers));
	shm_toc_estimate_keys(&pcxt->estimator, 3);
	InitializeParallelDSM(pcxt);

	shared = shm_toc_allocate(pcxt->toc, sizeof(RelScanShared));
	shared->relid = RelationGetRelid(rel);
	shared->attno = attno;
	shared->typlen = typlen;
	shared->with_tids = f->with_tids;
	shared->null_keys_fail = f->null_keys_fail;
	shm_toc_insert(pcxt->toc, KEY_SHARED, shared);
	pscan = shm_toc_allocate(pcxt->toc, pscan_size);
	table_parallelscan_initialize(rel, pscan, snapshot);
	shm_toc_insert(pcxt->toc, KEY_SCAN, pscan);

	/* without a segment (none to be had) pcxt->nworkers is 0 */
	if (pcxt->nworkers > 0)
	{
		queues = shm_toc_allocate(pcxt->toc, mul_size(QUEUE_BYTES, pcxt->nworkers));
		shm_toc_insert(pcxt->toc, KEY_QUEUES, queues);
		mqh = palloc(sizeof(shm_mq_handle *) * pcxt->nworkers);
		for (int i = 0; i < pcxt->nworkers; i++)
		{
			shm_mq	   *mq = shm_mq_create(queues + (Size) i * QUEUE_BYTES, QUEUE_BYTES);

			shm_mq_set_receiver(mq, MyProc);
			mqh[i] = shm_mq_attach(mq, pcxt->seg, NULL);
		}
		LaunchParallelWorkers(pcxt);
	}

	if (pcxt->nworkers_launched == 0)
	{
		/* the leader takes every page of the parallel scan itself */
		scan = table_beginscan_parallel(rel, pscan);
		scan_rows(rel, scan, attno, typlen, f->null_keys_fail, &ls.sink);
		table_endscan(scan);
	}
	else
	{
		/*
		 * Workers get numbers from 0 in launch order, so the first
		 * nworkers_launched queues are theirs; a queue whose worker dies
		 * before attaching reads as detached through its handle, and
		 * WaitForParallelWorkersToFinish then reports the failure.
		 */
		for (int i = 0; i < pcxt->nworkers_launched; i++)
			shm_mq_set_handle(mqh[i], pcxt->worker[i].bgwhandle);
		drain_queues(f, mqh, pcxt->nworkers_launched);
	}
	WaitForParallelWorkersToFinish(pcxt);
	DestroyParallelContext(pcxt);
	ExitParallelMode();
}

/* ---- other relations: SELECT key_column FROM rel through SPI ------------- */

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
	leader_sink_init(&r.ls, f);
	r.typlen = typlen;

	/* a parallel plan calls the table from its leader in parallel mode */
	prepare_table_writes(f->stream->handle);
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
