/*
 * new_keys_exec.c — running "cpht new keys" (new_keys.h): every participant
 * of a Gather (the workers and the leader) takes pages of the relation
 * from one parallel heap scan, feeds their keys into a stream of its own
 * (stream/heap_feed.c) and returns the keys the table answered new as its
 * rows; the node's shared memory, and EXPLAIN.
 *
 * Invariants: every key of the relation is sent once, whatever the caller
 * reads (an early end sends the rest without returning it, at shutdown or
 * at the end); a new key is returned by the one participant that sent it;
 * the node is never read twice (a rescan after it started is an error).
 * Locking: every participant opens the relation with AccessShareLock for
 * the node's life and checks the caller's SELECT right, as the function
 * does.  The shared totals (NewKeysShared) are atomics, added to by every
 * participant and read by the leader; the rest of the shared memory is
 * written by the leader before the workers start and only read after.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/nodeCustom.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

#include "cpht_table.h"
#include "plan/new_keys.h"
#include "plan/plan_util.h"
#include "session/session.h"
#include "stream/stream.h"

CustomScanMethods cpht_new_keys_scan_methods;
static CustomExecMethods new_keys_exec_methods;

/* What every participant reads from the node's shared memory. */
typedef struct NewKeysShared
{
	int32		handle;
	Oid			relid;
	AttrNumber	attno;
	int16		typlen;
	bool		leader_only;	/* the query route: workers return nothing */
	/* what every participant sent so far (count_sent) */
	pg_atomic_uint64 keys_sent;
	pg_atomic_uint64 new_keys;
	pg_atomic_uint64 table_us;
	/* the parallel heap scan's state follows, MAXALIGNed */
} NewKeysShared;

#define SHARED_PSCAN(s) \
	((ParallelTableScanDesc) ((char *) (s) + MAXALIGN(sizeof(NewKeysShared))))

typedef struct NewKeysState
{
	CustomScanState css;
	/* the call's arguments, evaluated at the node's start */
	bool		null_arg;		/* a NULL argument: no rows (the function is strict) */
	int32		handle;
	Oid			relid;
	NameData	key_column;
	/* the relation and its key column */
	Relation	rel;
	AttrNumber	attno;
	int16		typlen;
	NewKeysShared *shared;		/* NULL unless run under a Gather that set one up */
	bool		leader_only;
	/* the work */
	bool		started;
	bool		scan_done;		/* every key sent and answered */
	bool		returning;		/* false once the node ends early: keys are only sent */
	TableScanDesc scan;
	TupleTableSlot *heap_slot;
	int			chunk_rows;		/* rows read into feed.chunk between hand-overs */
	RelFeed		feed;
	/* new keys to return: out[pos..n), or the query route's tuplestore */
	uint64	   *out;
	size_t		out_n;
	size_t		out_pos;
	size_t		out_cap;
	Tuplestorestate *store;
	TupleTableSlot *store_slot; /* reads the tuplestore's minimal tuples */
	/*
	 * The keys sent, the new ones and the time in the table's calls: this
	 * participant's counted so far (count_sent), and every participant's
	 * as the leader last read them, for cpht_stat_progress and EXPLAIN
	 * ANALYZE.
	 */
	uint64		counted_keys;
	uint64		counted_new;
	uint64		counted_us;
	uint64		sent_keys;
	uint64		sent_new;
	uint64		sent_us;
	bool		progress;		/* the leader reports cpht_stat_progress */
} NewKeysState;

/* ---- execution ----------------------------------------------------------- */

static Node *
new_keys_create_state(CustomScan *cs)
{
	NewKeysState *ns = (NewKeysState *) newNode(sizeof(NewKeysState), T_CustomScanState);

	ns->css.methods = &new_keys_exec_methods;
	return (Node *) ns;
}

static void
new_keys_begin(CustomScanState *node, EState *estate, int eflags)
{
	NewKeysState *ns = (NewKeysState *) node;
	CustomScan *cs = (CustomScan *) node->ss.ps.plan;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	Datum		values[3];
	int			i = 0;
	ListCell   *lc;

	foreach(lc, cs->custom_exprs)
	{
		ExprState  *arg = ExecInitExpr(lfirst(lc), &node->ss.ps);
		bool		isnull;

		values[i++] = ExecEvalExprSwitchContext(arg, econtext, &isnull);
		if (isnull)
			ns->null_arg = true;
	}
	ResetExprContext(econtext);
	if (ns->null_arg)
		return;
	ns->handle = DatumGetInt32(values[0]);
	ns->relid = DatumGetObjectId(values[1]);
	namestrcpy(&ns->key_column, NameStr(*DatumGetName(values[2])));
	ns->returning = true;
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	/* The relation, its column and the caller's right to read it, checked
	 * by every participant as the function checks them. */
	ns->rel = table_open(ns->relid, AccessShareLock);
	ns->attno = cpht_relscan_key_column(ns->rel, NameStr(ns->key_column), false, &ns->typlen);
	cpht_relscan_check_select(ns->rel, ns->attno);
	ns->leader_only = !cpht_relscan_reads_all(ns->rel);
}

/* New keys of an answered batch go to the rows to return. */
static void
take_new_keys(RelFeed *f, const uint64 *keys, const uint64 *tids,
			  const uint8 *status, size_t n)
{
	NewKeysState *ns = f->arg;

	if (!ns->returning)
		return;
	if (ns->store != NULL)
	{
		TupleDesc	desc = ns->css.ss.ss_ScanTupleSlot->tts_tupleDescriptor;

		for (size_t i = 0; i < n; i++)
			if (status[i] == CPHT_PUT)
			{
				Datum		d = Int64GetDatum((int64) keys[i]);
				bool		isnull = false;

				tuplestore_putvalues(ns->store, desc, &d, &isnull);
			}
		return;
	}
	if (ns->out_n + n > ns->out_cap)
	{
		ns->out_cap = Max(ns->out_cap * 2, ns->out_n + n);
		ns->out = repalloc_huge(ns->out, sizeof(uint64) * ns->out_cap);
	}
	for (size_t i = 0; i < n; i++)
		if (status[i] == CPHT_PUT)
			ns->out[ns->out_n++] = keys[i];
}

/*
 * What this participant sent since it last counted: into the node's shared
 * totals under a Gather (the workers' streams are their own), and in the
 * leader into the figures of all participants, which its progress report
 * shows.
 */
static void
count_sent(NewKeysState *ns)
{
	CphtBatchStream *st = ns->feed.stream;
	uint64		us_total,
				keys,
				fresh,
				us;

	if (st == NULL)
		return;
	us_total = (uint64) (st->times.total * 1000.0);
	keys = st->keys - ns->counted_keys;
	fresh = ns->feed.inserted - ns->counted_new;
	us = us_total > ns->counted_us ? us_total - ns->counted_us : 0;
	ns->counted_keys = st->keys;
	ns->counted_new = ns->feed.inserted;
	ns->counted_us += us;
	if (ns->shared != NULL)
	{
		NewKeysShared *shared = ns->shared;

		pg_atomic_fetch_add_u64(&shared->keys_sent, keys);
		pg_atomic_fetch_add_u64(&shared->new_keys, fresh);
		pg_atomic_fetch_add_u64(&shared->table_us, us);
		if (IsParallelWorker())
			return;
		ns->sent_keys = pg_atomic_read_u64(&shared->keys_sent);
		ns->sent_new = pg_atomic_read_u64(&shared->new_keys);
		ns->sent_us = pg_atomic_read_u64(&shared->table_us);
	}
	else
	{
		ns->sent_keys += keys;
		ns->sent_new += fresh;
		ns->sent_us += us;
	}
	if (ns->progress)
		cpht_progress_set_sent(ns->sent_keys, ns->sent_new);
}

/* Opens the stream and the scan of this participant's share. */
static void
new_keys_start(NewKeysState *ns)
{
	EState	   *estate = ns->css.ss.ps.state;
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);

	ns->started = true;
	cpht_relfeed_begin(&ns->feed, ns->handle, false, false, take_new_keys, ns);
	if (!IsParallelWorker())
		ns->progress = cpht_progress_begin(CPHT_PROGRESS_FOP_NEW_RELATION, ns->handle, ns->rel);
	ns->out_cap = Max(ns->feed.stream->batch_keys, 1);
	ns->out = MemoryContextAllocHuge(estate->es_query_cxt, sizeof(uint64) * ns->out_cap);
	if (ns->leader_only)
	{
		/* the query route, in the leader; workers have nothing to do */
		if (!IsParallelWorker())
		{
			ns->store = tuplestore_begin_heap(false, false, work_mem);
			ns->store_slot = MakeSingleTupleTableSlot(ns->css.ss.ss_ScanTupleSlot->tts_tupleDescriptor,
													  &TTSOpsMinimalTuple);
			cpht_relscan_query(&ns->feed, ns->rel, NameStr(ns->key_column), ns->typlen);
			cpht_relfeed_finish(&ns->feed, "cpht_fop_new");
			count_sent(ns);
		}
		ns->scan_done = true;
		MemoryContextSwitchTo(old);
		return;
	}
	/* at most a batch, so that the first rows come back after a batch
	 * rather than after a whole share of the relation */
	ns->chunk_rows = Min(CPHT_RELSCAN_CHUNK_ROWS, ns->feed.stream->batch_keys);
	ns->heap_slot = table_slot_create(ns->rel, NULL);
	if (ns->shared != NULL)
		ns->scan = table_beginscan_parallel(ns->rel, SHARED_PSCAN(ns->shared));
	else
		ns->scan = table_beginscan(ns->rel, estate->es_snapshot, 0, NULL);
	MemoryContextSwitchTo(old);
}

/* Reads up to chunk_rows rows of the scan into the stream; at the scan's
 * end, collects the last batches. */
static void
new_keys_advance(NewKeysState *ns)
{
	int			n = 0;
	bool		more = true;

	while (n < ns->chunk_rows &&
		   (more = table_scan_getnextslot(ns->scan, ForwardScanDirection, ns->heap_slot)))
	{
		bool		isnull;
		Datum		d = slot_getattr(ns->heap_slot, ns->attno, &isnull);

		if (!isnull)
			ns->feed.chunk[n++] = cpht_relscan_key_value(d, ns->typlen);
	}
	if (n > 0)
		cpht_relfeed_put(&ns->feed, ns->feed.chunk, n);
	if (!more)
		cpht_relfeed_finish(&ns->feed, "cpht_fop_new");
	count_sent(ns);
	if (!more)
	{
		table_endscan(ns->scan);
		ns->scan = NULL;
		ns->scan_done = true;
	}
}

static TupleTableSlot *
new_keys_next(ScanState *ss)
{
	NewKeysState *ns = (NewKeysState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;

	if (ns->null_arg)
		return ExecClearTuple(slot);
	if (!ns->started)
		new_keys_start(ns);
	if (ns->store != NULL)
	{
		bool		isnull;

		if (!tuplestore_gettupleslot(ns->store, true, false, ns->store_slot))
			return ExecClearTuple(slot);
		ExecClearTuple(slot);
		slot->tts_values[0] = slot_getattr(ns->store_slot, 1, &isnull);
		slot->tts_isnull[0] = isnull;
		return ExecStoreVirtualTuple(slot);
	}
	while (ns->out_pos == ns->out_n)
	{
		if (ns->scan_done)
			return ExecClearTuple(slot);
		ns->out_pos = ns->out_n = 0;
		new_keys_advance(ns);
	}
	ExecClearTuple(slot);
	slot->tts_values[0] = Int64GetDatum((int64) ns->out[ns->out_pos++]);
	slot->tts_isnull[0] = false;
	return ExecStoreVirtualTuple(slot);
}

static bool
new_keys_recheck(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
new_keys_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, new_keys_next, new_keys_recheck);
}

/*
 * Sends the rest of this participant's keys without returning them: the
 * node is ending before its scan did.  Runs at the end, and before it at
 * shutdown under a Gather that set up shared memory (the parallel scan,
 * gone once the Gather shuts down).
 */
static void
new_keys_finish_rest(NewKeysState *ns)
{
	if (ns->null_arg || ns->rel == NULL || ns->scan_done)
		return;
	if (!ns->started)
		new_keys_start(ns);
	ns->returning = false;
	while (!ns->scan_done)
		new_keys_advance(ns);
}

/*
 * A plan run for a number of rows (execute_once false: a portal fetched
 * from in parts, a SQL function's query read one row per call) is shut
 * down after every part and read again, always without workers, so
 * without shared memory: the rest of the keys wait for the end there.
 */
static void
new_keys_shutdown(CustomScanState *node)
{
	NewKeysState *ns = (NewKeysState *) node;

	if (ns->shared == NULL)
		return;

	/*
	 * The query route returns its keys from the leader alone.  A Gather
	 * that ran without reading rows in the leader (the workers launched,
	 * parallel_leader_participation off) never asked for them: putting the
	 * keys now would report them new to nobody.
	 */
	if (ns->leader_only && !ns->started && !ns->null_arg && ns->rel != NULL &&
		!IsParallelWorker())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("relation \"%s\" changed after cpht_fop_new_relation was planned to read it in parallel workers",
						RelationGetRelationName(ns->rel)),
				 errdetail("The relation is now read by a query in the leader, which reads no rows of this plan while parallel_leader_participation is off."),
				 errhint("Run the statement again.")));
	new_keys_finish_rest(ns);
	/* the workers' last keys, before the shared memory goes */
	if (!IsParallelWorker() && ns->started)
		count_sent(ns);
}

static void
new_keys_end(CustomScanState *node)
{
	NewKeysState *ns = (NewKeysState *) node;

	new_keys_finish_rest(ns);
	cpht_progress_end(ns->progress);
	ns->progress = false;
	if (ns->heap_slot != NULL)
		ExecDropSingleTupleTableSlot(ns->heap_slot);
	if (ns->store_slot != NULL)
		ExecDropSingleTupleTableSlot(ns->store_slot);
	if (ns->store != NULL)
		tuplestore_end(ns->store);
	if (ns->rel != NULL)
		table_close(ns->rel, AccessShareLock);
}

static void
new_keys_rescan(CustomScanState *node)
{
	NewKeysState *ns = (NewKeysState *) node;

	/* the planner puts the node where nothing rescans it (new_keys_planner.c) */
	if (ns->started)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht_fop_new_relation cannot return its rows a second time"),
				 errdetail("Its keys are no longer new once returned.")));
}

/* ---- parallel ------------------------------------------------------------ */

static Size
new_keys_estimate(CustomScanState *node, ParallelContext *pcxt)
{
	NewKeysState *ns = (NewKeysState *) node;

	if (ns->rel == NULL)
		return MAXALIGN(sizeof(NewKeysShared));
	return add_size(MAXALIGN(sizeof(NewKeysShared)),
					table_parallelscan_estimate(ns->rel, node->ss.ps.state->es_snapshot));
}

static void
new_keys_init_dsm(CustomScanState *node, ParallelContext *pcxt, void *coordinate)
{
	NewKeysState *ns = (NewKeysState *) node;
	NewKeysShared *shared = coordinate;

	memset(shared, 0, sizeof(*shared));
	pg_atomic_init_u64(&shared->keys_sent, 0);
	pg_atomic_init_u64(&shared->new_keys, 0);
	pg_atomic_init_u64(&shared->table_us, 0);
	if (ns->null_arg || ns->rel == NULL)
	{
		shared->leader_only = true;
		shared->relid = InvalidOid;
		ns->shared = shared;
		return;
	}
	shared->handle = ns->handle;
	shared->relid = ns->relid;
	shared->attno = ns->attno;
	shared->typlen = ns->typlen;
	shared->leader_only = ns->leader_only;
	if (!ns->leader_only)
		table_parallelscan_initialize(ns->rel, SHARED_PSCAN(shared),
									  node->ss.ps.state->es_snapshot);
	ns->shared = shared;
}

static void
new_keys_reinit_dsm(CustomScanState *node, ParallelContext *pcxt, void *coordinate)
{
	new_keys_rescan(node);
}

static void
new_keys_init_worker(CustomScanState *node, shm_toc *toc, void *coordinate)
{
	NewKeysState *ns = (NewKeysState *) node;
	NewKeysShared *shared = coordinate;

	ns->shared = shared;
	if (shared->leader_only)
	{
		/* nothing to read here: the leader reads the relation, if any */
		ns->null_arg = true;
		return;
	}
	/* the leader's evaluation of the arguments, and its decision */
	ns->handle = shared->handle;
	Assert(ns->rel != NULL && RelationGetRelid(ns->rel) == shared->relid);
	ns->attno = shared->attno;
	ns->typlen = shared->typlen;
	ns->leader_only = false;
}

static void
new_keys_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	NewKeysState *ns = (NewKeysState *) node;
	char	   *relname;

	if (ns->null_arg)
		return;
	relname = get_rel_name(ns->relid);
	if (relname != NULL)
		ExplainPropertyText("Relation", relname, es);
	ExplainPropertyText("Key Column", NameStr(ns->key_column), es);
	/* the shared table's name, as the call may have given it */
	cpht_plan_explain_table(ns->handle, es);

	/* ANALYZE: what every participant sent, and the table's time on it */
	if (es->analyze && ns->started)
	{
		ExplainPropertyUInteger("Keys Sent", NULL, ns->sent_keys, es);
		ExplainPropertyUInteger("New Keys", NULL, ns->sent_new, es);
		ExplainPropertyFloat("Time in Table", "ms", (double) ns->sent_us / 1000.0, 3, es);
	}
}

void
cpht_new_keys_exec_init(void)
{
	cpht_new_keys_scan_methods.CustomName = CPHT_NEW_KEYS_NODE_NAME;
	cpht_new_keys_scan_methods.CreateCustomScanState = new_keys_create_state;
	RegisterCustomScanMethods(&cpht_new_keys_scan_methods);

	new_keys_exec_methods.CustomName = CPHT_NEW_KEYS_NODE_NAME;
	new_keys_exec_methods.BeginCustomScan = new_keys_begin;
	new_keys_exec_methods.ExecCustomScan = new_keys_exec;
	new_keys_exec_methods.EndCustomScan = new_keys_end;
	new_keys_exec_methods.ReScanCustomScan = new_keys_rescan;
	new_keys_exec_methods.EstimateDSMCustomScan = new_keys_estimate;
	new_keys_exec_methods.InitializeDSMCustomScan = new_keys_init_dsm;
	new_keys_exec_methods.ReInitializeDSMCustomScan = new_keys_reinit_dsm;
	new_keys_exec_methods.InitializeWorkerCustomScan = new_keys_init_worker;
	new_keys_exec_methods.ShutdownCustomScan = new_keys_shutdown;
	new_keys_exec_methods.ExplainCustomScan = new_keys_explain;
}
