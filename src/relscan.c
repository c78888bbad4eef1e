/*
 * relscan.c — find-or-put of a whole relation's key column:
 *
 *   cpht_fop_relation(handle, rel, key_column)      how many keys were new
 *   cpht_fop_new_relation(handle, rel, key_column)  the new keys, each once
 *
 * Both read the relation themselves and hand its keys to the table in
 * batches of cpht.batch_size, with no function call per row.
 *
 * Fast path: a plain heap table without inheritance children and without
 * row-level security for the caller is read by a parallel heap scan of our
 * own (a ParallelContext, as PostgreSQL's parallel index builds use one).
 * Each worker scans the pages the shared scan gives it under the
 * statement's snapshot and sends its keys to the leader through a message
 * queue, in chunks of CHUNK_KEYS; the leader drains the queues into
 * batches and makes every table call itself, with the caller's handle and
 * transaction.  So any table works (private or shared, in this backend or
 * in the cpht worker, CPU or GPU), and transactions mean what they mean
 * for cpht_fop_agg.  The number of workers follows the planner's rule for
 * a scan of the relation (compute_workers); with none launched the leader
 * scans alone, with the same code.
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
#include "funcapi.h"
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
#include "utils/tuplestore.h"

#include "client.h"
#include "cpht_table.h"
#include "handles.h"
#include "shared_tables.h"
#include "stream.h"
#include "waits.h"

/* Keys a worker sends to the leader per message. */
#define CHUNK_KEYS 65536

/* Each worker's queue holds a few chunks, so a worker scans on while the
 * leader is in a table call. */
#define QUEUE_BYTES (4 * CHUNK_KEYS * sizeof(int64))

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
} RelScanShared;

/*
 * Where a scan puts its keys: a buffer of cap keys that flush empties (a
 * worker's into its queue, the leader's into the table's batches).
 */
typedef struct KeySink
{
	int64	   *keys;
	int			n;
	int			cap;
	void		(*flush) (struct KeySink *sink);
} KeySink;

/*
 * The leader's side: batches of the table's stream (stream.c), two of
 * them, since the statuses of a batch come back when the next one is
 * handed over and cpht_fop_new_relation needs that batch's keys then.
 */
typedef struct Feeder
{
	KeySink		sink;			/* the leader's own scan writes here */
	Stream	   *stream;
	uint64	   *batch[2];
	int			n;				/* keys in batch[cur] */
	int			cur;
	uint64		inserted;
	Tuplestorestate *out;		/* the new keys, or NULL to count only */
	TupleDesc	out_desc;
} Feeder;

/* ---- which relation, which column ---------------------------------------- */

/*
 * The key column of rel: 42703 when there is none, 42804 when it is not
 * bigint, integer or smallint (or a domain over one); its length in *typlen.
 */
static AttrNumber
key_column_of(Relation rel, const char *key_column, int16 *typlen)
{
	AttrNumber	attno = attnameAttNum(rel, key_column, false);
	Oid			type;

	if (attno <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						key_column, RelationGetRelationName(rel))));
	type = getBaseType(TupleDescAttr(RelationGetDescr(rel), attno - 1)->atttypid);
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
static void
check_select(Relation rel, AttrNumber attno)
{
	Oid			relid = RelationGetRelid(rel);
	Oid			role = GetUserId();

	if (pg_class_aclcheck(relid, role, ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck(relid, attno, role, ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(rel->rd_rel->relkind),
					   RelationGetRelationName(rel));
}

/*
 * Whether our own scan reads exactly what SELECT key_column FROM rel
 * would: a plain heap table, no children to expand, no policy to apply.
 */
static bool
scan_reads_all(Relation rel)
{
	return rel->rd_rel->relkind == RELKIND_RELATION &&
		rel->rd_rel->relam == HEAP_TABLE_AM_OID &&
		!rel->rd_rel->relhassubclass &&
		check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_NONE;
}

/*
 * Workers for a scan of rel, as the planner counts them for a sequential
 * scan (compute_parallel_worker): the parallel_workers storage parameter,
 * or one more worker each time the heap is three times larger than
 * min_parallel_table_scan_size, at most max_parallel_workers_per_gather.
 * None in a parallel operation already, or for a temporary table, whose
 * pages live in this backend.
 */
static int
compute_workers(Relation rel)
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

/* Every non-NULL key of the scan's tuples into sink. */
static void
scan_keys(Relation rel, TableScanDesc scan, AttrNumber attno, int16 typlen, KeySink *sink)
{
	TupleTableSlot *slot = table_slot_create(rel, NULL);

	/* heap scans check for interrupts on every page */
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		d = slot_getattr(slot, attno, &isnull);

		if (isnull)
			continue;
		sink->keys[sink->n++] = typlen == 8 ? DatumGetInt64(d) :
			typlen == 4 ? (int64) DatumGetInt32(d) : (int64) DatumGetInt16(d);
		if (sink->n == sink->cap)
			sink->flush(sink);
	}
	if (sink->n > 0)
		sink->flush(sink);
	ExecDropSingleTupleTableSlot(slot);
}

/* ---- workers ------------------------------------------------------------- */

typedef struct QueueSink
{
	KeySink		sink;
	shm_mq_handle *mqh;
} QueueSink;

static void
queue_flush(KeySink *sink)
{
	QueueSink  *qs = (QueueSink *) sink;

	/* A detached leader is ending with an error, which ends this worker. */
	(void) shm_mq_send(qs->mqh, sizeof(int64) * sink->n, sink->keys, false, true);
	sink->n = 0;
}

PGDLLEXPORT void cpht_relscan_worker(dsm_segment *seg, shm_toc *toc);

/* A parallel worker's entry: scans its share of the relation's pages and
 * sends the keys to the leader. */
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
	qs.sink.keys = palloc(sizeof(int64) * CHUNK_KEYS);
	qs.sink.n = 0;
	qs.sink.cap = CHUNK_KEYS;
	qs.sink.flush = queue_flush;

	rel = table_open(shared->relid, AccessShareLock);
	scan = table_beginscan_parallel(rel, pscan);
	scan_keys(rel, scan, shared->attno, shared->typlen, &qs.sink);
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	shm_mq_detach(qs.mqh);
}

/* ---- the leader: batches into the table --------------------------------- */

/* Hands batch[cur] to the table and takes the statuses of the batch
 * before it; the next keys go to the other buffer. */
static void
feeder_swap(Feeder *f)
{
	const uint8 *status;
	size_t		nstatus;
	const uint64 *prev = f->batch[1 - f->cur];

	f->inserted += cpht_stream_swap(f->stream, f->batch[f->cur], f->n,
									f->out ? &status : NULL, &nstatus);
	if (f->out)
	{
		for (size_t i = 0; i < nstatus; i++)
		{
			if (status[i] == CPHT_PUT)
			{
				Datum		d = Int64GetDatum((int64) prev[i]);
				bool		isnull = false;

				tuplestore_putvalues(f->out, f->out_desc, &d, &isnull);
			}
		}
	}
	f->cur = 1 - f->cur;
	f->n = 0;
}

/* Adds n keys to the batches, handing each full batch to the table. */
static void
feed(Feeder *f, const int64 *keys, int n)
{
	int			key_bits = f->stream->key_bits;

	while (n > 0)
	{
		int			take = Min(n, f->stream->batch_keys - f->n);
		uint64	   *to = f->batch[f->cur] + f->n;

		if (key_bits > 0 && key_bits < 64)
			for (int i = 0; i < take; i++)
				cpht_stream_check_key((uint64) keys[i], key_bits);
		memcpy(to, keys, sizeof(uint64) * take);
		f->n += take;
		keys += take;
		n -= take;
		if (f->n == f->stream->batch_keys)
			feeder_swap(f);
	}
}

/* Sends the last partial batch and collects it. */
static void
feeder_finish(Feeder *f)
{
	feeder_swap(f);
	feeder_swap(f);
}

static void
leader_flush(KeySink *sink)
{
	Feeder	   *f = (Feeder *) sink;

	feed(f, sink->keys, sink->n);
	sink->n = 0;
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
drain_queues(Feeder *f, shm_mq_handle **mqh, int nqueues)
{
	bool	   *done = palloc0(sizeof(bool) * nqueues);
	int			active = nqueues;

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
				feed(f, (const int64 *) data, (int) (nbytes / sizeof(int64)));
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

/* The fast path: a parallel scan of rel (or the leader's own scan). */
static void
scan_relation(Feeder *f, Relation rel, AttrNumber attno, int16 typlen)
{
	Snapshot	snapshot = GetActiveSnapshot();
	int			nworkers = compute_workers(rel);
	ParallelContext *pcxt;
	RelScanShared *shared;
	ParallelTableScanDesc pscan;
	Size		pscan_size;
	char	   *queues = NULL;
	shm_mq_handle **mqh = NULL;
	TableScanDesc scan;

	if (nworkers == 0)
	{
		scan = table_beginscan(rel, snapshot, 0, NULL);
		scan_keys(rel, scan, attno, typlen, &f->sink);
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
		scan_keys(rel, scan, attno, typlen, &f->sink);
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
	Feeder	   *feeder;
	int16		typlen;
} FeedReceiver;

static bool
feed_receive(TupleTableSlot *slot, DestReceiver *self)
{
	FeedReceiver *r = (FeedReceiver *) self;
	KeySink    *sink = &r->feeder->sink;
	bool		isnull;
	Datum		d = slot_getattr(slot, 1, &isnull);

	if (!isnull)
	{
		sink->keys[sink->n++] = r->typlen == 8 ? DatumGetInt64(d) :
			r->typlen == 4 ? (int64) DatumGetInt32(d) : (int64) DatumGetInt16(d);
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
static void
query_relation(Feeder *f, Relation rel, const char *key_column, int16 typlen)
{
	FeedReceiver r;
	SPIExecuteOptions options;
	char	   *sql;
	int			rc;

	sql = psprintf("SELECT %s FROM %s", quote_identifier(key_column),
				   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											  RelationGetRelationName(rel)));
	memset(&r, 0, sizeof(r));
	r.pub.receiveSlot = feed_receive;
	r.pub.rStartup = feed_startup;
	r.pub.rShutdown = feed_shutdown;
	r.pub.rDestroy = feed_destroy;
	r.pub.mydest = DestNone;
	r.feeder = f;
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
	if (f->sink.n > 0)
		f->sink.flush(&f->sink);
}

/* ---- the SQL functions --------------------------------------------------- */

static void
fop_relation(FunctionCallInfo fcinfo, Feeder *f)
{
	int32		handle = PG_GETARG_INT32(0);
	Oid			relid = PG_GETARG_OID(1);
	const char *key_column = NameStr(*PG_GETARG_NAME(2));
	Relation	rel;
	AttrNumber	attno;
	int16		typlen;

	/* Settings are read here, once: the relation's scan may not change them. */
	f->stream = cpht_stream_begin(CurrentMemoryContext, handle, 2 * sizeof(uint64));
	for (int b = 0; b < 2; b++)
		f->batch[b] = MemoryContextAllocHuge(CurrentMemoryContext,
											 sizeof(uint64) * f->stream->batch_keys);
	f->sink.cap = CHUNK_KEYS;
	f->sink.keys = palloc(sizeof(int64) * f->sink.cap);
	f->sink.flush = leader_flush;

	rel = relation_open(relid, AccessShareLock);
	attno = key_column_of(rel, key_column, &typlen);
	check_select(rel, attno);
	if (scan_reads_all(rel))
		scan_relation(f, rel, attno, typlen);
	else
		query_relation(f, rel, key_column, typlen);
	relation_close(rel, AccessShareLock);
	feeder_finish(f);
}

PG_FUNCTION_INFO_V1(cpht_fop_relation);
Datum
cpht_fop_relation(PG_FUNCTION_ARGS)
{
	Feeder		f;

	memset(&f, 0, sizeof(f));
	fop_relation(fcinfo, &f);
	PG_RETURN_INT64((int64) f.inserted);
}

PG_FUNCTION_INFO_V1(cpht_fop_new_relation);
Datum
cpht_fop_new_relation(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Feeder		f;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	memset(&f, 0, sizeof(f));
	f.out = rsinfo->setResult;
	f.out_desc = rsinfo->setDesc;
	fop_relation(fcinfo, &f);
	return (Datum) 0;
}
