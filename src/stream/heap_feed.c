/*
 * heap_feed.c — the fast route: a relation's key column (and, for
 * cpht_insert_new, each row's tid) read by a parallel heap scan of our own
 * into a feed (relfeed.c), with no function call per row: the funnel under
 * cpht_fop_relation, cpht_fop_new_relation (api/fop_relation.c) and
 * cpht_insert_new (api/insert_new.c), for a relation that relation.c says
 * it reads as a query would (a plain heap table without inheritance
 * children and without row-level security for the caller); any other goes
 * by query_feed.c.
 *
 * A ParallelContext, as PostgreSQL's parallel index builds use one.  Each
 * worker scans the pages the shared scan gives it under the statement's
 * snapshot and sends its rows (a key, or a key and the row's tid) to the
 * leader through a message queue, in chunks of CHUNK_ROWS; the leader
 * drains the queues into batches and makes every table call itself, with
 * the caller's handle and transaction.  So any table works (private or
 * shared, in this backend or in the cpht worker, CPU or GPU), and
 * transactions mean what they mean for cpht_fop_agg.  The number of
 * workers follows the planner's rule for a scan of the relation
 * (cpht_relscan_workers); with none launched the leader scans alone, with
 * the same code.
 *
 * Locking: every worker opens the relation with AccessShareLock for its
 * scan; the leader holds it open throughout.  The shared memory
 * (RelScanShared, the parallel scan, the queues) is written by the leader
 * before the workers launch.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/parallel.h"
#include "access/relscan.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "stream/feed_internal.h"

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

	cpht_feed_leader_sink(&ls, f);
	if (nworkers == 0)
	{
		scan = table_beginscan(rel, snapshot, 0, NULL);
		scan_rows(rel, scan, attno, typlen, f->null_keys_fail, &ls.sink);
		table_endscan(scan);
		return;
	}

	cpht_feed_prepare_writes(f->stream->handle);
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
