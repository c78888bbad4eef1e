/*
 * new_keys_node.c — cpht_fop_new_relation as a parallel plan node.
 *
 *   SELECT count(*) FROM cpht_fop_new_relation(h, 'staging');
 *
 * As a set-returning function, cpht_fop_new_relation reads the relation in
 * parallel (stream/heap_feed.c) but returns its new keys through one backend: the
 * function scan stores every row in a tuplestore and reads it back, and
 * whatever the query does with the rows runs in that backend too.  Over a
 * shared table, which parallel workers reach (hooks.c), the
 * planner hook below offers, in place of the function scan, a
 * parallel-aware scan node, "cpht new keys": every participant of a
 * Gather (the workers and the leader) takes pages of the relation from
 * one parallel heap scan, sends their keys to the table in batches of its
 * own stream, and returns the keys the table reported new as its rows.  Aggregates above it run
 * partially in the workers, so a count of the new keys moves no row
 * between processes.  The table sees the same keys as from the function,
 * once each, and answers each new key to exactly one participant.
 *
 * When.  The hook adds the node only where nothing can ask it to return
 * its rows twice (find-or-put answers "new" once): the function is the
 * only relation of a top-level query (no join to rescan it, no subquery
 * or CTE around it), called with constants or parameters the plan is made
 * for, on a shared table this session has open, over a relation that the
 * parallel scan reads as a query would (cpht_relscan_reads_all) with at
 * least one worker to give it.  The planner then weighs the node under a
 * Gather against the function scan (see the costs below).
 * cpht_fop_new_relation is PARALLEL RESTRICTED for this: a function scan
 * of it still runs only in the leader.  A plan made for a role that the
 * relation's policies do not bind is made again for another role
 * (dependsOnRole, as row-level security needs); a change to the relation
 * invalidates it (relationOids).
 *
 * Every key.  The function puts every key of the relation whatever its
 * caller reads; so does the node: when it ends before its scan is done
 * (a LIMIT above it), it sends the rest of its pages' keys without
 * returning them.
 *
 * If the relation no longer qualifies when the plan runs, the leader reads
 * it through the query route of stream/heap_feed.c and returns the new keys from a
 * tuplestore, as the function would; the workers return nothing.  A
 * leader that reads no rows of the plan (parallel_leader_participation
 * off) cannot do that: such a run fails before it puts any key.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/relation.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/nodeCustom.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/plancat.h"
#include "parser/parsetree.h"
#include "optimizer/restrictinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "api/api.h"
#include "cpht_table.h"
#include "plan/plan.h"
#include "session/session.h"
#include "stream/stream.h"

#define NODE_NAME "cpht new keys"

static set_rel_pathlist_hook_type prev_set_rel_pathlist = NULL;

static CustomPathMethods new_keys_path_methods;
static CustomScanMethods new_keys_scan_methods;
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

/* ---- which calls --------------------------------------------------------- */

bool
cpht_is_fop_new_relation(Oid funcid)
{
	return cpht_function_is(funcid, cpht_fop_new_relation);
}

/* Whether type is cpht_table (api/names.c), whatever schema holds it: its
 * input function is ours. */
static bool
is_table_type(Oid type)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
	Oid			typinput;

	if (!HeapTupleIsValid(tup))
		return false;
	typinput = ((Form_pg_type) GETSTRUCT(tup))->typinput;
	ReleaseSysCache(tup);
	return cpht_function_is(typinput, cpht_table_in);
}

/*
 * Here, with the other recognition of api/'s functions (the one file of
 * plan/ that includes api/api.h), for hooks.c too: a cpht_table holds the
 * handle of the table it names, the same number in every session.
 */
bool
cpht_plan_handle(Node *expr, ParamListInfo params, int32 *handle)
{
	Oid			type = exprType(expr);
	Datum		value;

	if (type != INT4OID && !is_table_type(type))
		return false;
	if (!cpht_plan_constant(expr, params, type, &value))
		return false;
	*handle = DatumGetInt32(value);
	return true;
}

bool
cpht_new_keys_plan(Plan *plan)
{
	return IsA(plan, CustomScan) &&
		((CustomScan *) plan)->methods == &new_keys_scan_methods;
}

/* Whether every Var of node is the function's one column. */
static bool
only_column_one(Node *node, Index rti)
{
	List	   *vars = pull_var_clause(node, PVC_RECURSE_PLACEHOLDERS);
	ListCell   *lc;
	bool		ok = true;

	foreach(lc, vars)
	{
		Var		   *v = lfirst(lc);

		if (!IsA(v, Var) || v->varno != rti || v->varattno != 1 || v->varlevelsup != 0)
			ok = false;
	}
	list_free(vars);
	return ok;
}

/* The share of a parallel scan's rows one participant reads, as the
 * planner's get_parallel_divisor counts it. */
static double
parallel_divisor(int workers)
{
	double		divisor = workers;

	if (parallel_leader_participation)
	{
		double		leader = 1.0 - 0.3 * workers;

		if (leader > 0)
			divisor += leader;
	}
	return divisor;
}

static void
new_keys_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *call;
	ParamListInfo params = root->glob->boundParams;
	int32		handle;
	Datum		relid_d,
				column_d;
	CphtHandle *h;
	Relation	scanned;
	int			workers = 0;
	int			rls;
	BlockNumber pages;
	double		tuples,
				allvisfrac;
	ListCell   *lc;
	CustomPath *cp;
	double		divisor;

	if (prev_set_rel_pathlist)
		prev_set_rel_pathlist(root, rel, rti, rte);

	if (rte->rtekind != RTE_FUNCTION || rte->funcordinality ||
		list_length(rte->functions) != 1 || rel->reloptkind != RELOPT_BASEREL)
		return;
	rtfunc = linitial(rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		return;
	call = (FuncExpr *) rtfunc->funcexpr;
	if (!cpht_is_fop_new_relation(call->funcid) || list_length(call->args) != 3)
		return;

	/* only the one relation of a top-level query, which nothing rescans */
	if (root->query_level != 1 || root->parent_root != NULL ||
		bms_membership(root->all_baserels) != BMS_SINGLETON ||
		!bms_is_empty(rel->lateral_relids) || root->hasRecursion)
		return;
	if (!root->glob->parallelModeOK || max_parallel_workers_per_gather <= 0)
		return;
	if (!only_column_one((Node *) rel->reltarget->exprs, rti))
		return;
	foreach(lc, rel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst(lc);

		if (!only_column_one((Node *) ri->clause, rti) ||
			!is_parallel_safe(root, (Node *) ri->clause))
			return;
	}

	/* a shared table this session has open, a relation by constants */
	if (!cpht_plan_handle(linitial(call->args), params, &handle) ||
		!cpht_plan_constant(lsecond(call->args), params, REGCLASSOID, &relid_d) ||
		!cpht_plan_constant(lthird(call->args), params, NAMEOID, &column_d))
		return;
	h = cpht_shared_lookup(handle);
	if (h == NULL || h->shared_entry < 0)
		return;

	/* as the planner locks the relations it plans a scan of */
	scanned = try_relation_open(DatumGetObjectId(relid_d), AccessShareLock);
	if (scanned == NULL)
		return;
	rls = check_enable_rls(RelationGetRelid(scanned), InvalidOid, true);
	if (cpht_relscan_reads_all(scanned) &&
		get_attnum(RelationGetRelid(scanned), NameStr(*DatumGetName(column_d))) > 0)
		workers = cpht_relscan_workers(scanned);
	estimate_rel_size(scanned, NULL, &pages, &tuples, &allvisfrac);
	relation_close(scanned, NoLock);
	if (workers <= 0)
		return;

	/* the plan holds for this relation as it is, and this role */
	root->glob->relationOids = lappend_oid(root->glob->relationOids, DatumGetObjectId(relid_d));
	if (rls == RLS_NONE_ENV)
		root->glob->dependsOnRole = true;

	/*
	 * Both plans counted for what they do: every row of the relation may
	 * give a new key; the function reads the relation in parallel too, but
	 * stores each new key and reads it back in one process, where whatever
	 * is above it runs.  So a query that reduces the rows (an aggregate
	 * that runs partially in the workers) takes the node under a Gather,
	 * and one that sends every row to the client, where a Gather would
	 * pass each row through a queue, keeps the function.
	 */
	rel->rows = clamp_row_est(tuples);
	divisor = parallel_divisor(workers);
	foreach(lc, rel->pathlist)
	{
		Path	   *path = lfirst(lc);

		path->rows = rel->rows;
		path->startup_cost = pages * seq_page_cost +
			tuples * (cpu_tuple_cost + cpu_operator_cost) / divisor +
			2 * tuples * cpu_tuple_cost;
		path->total_cost = path->startup_cost + tuples * cpu_tuple_cost;
	}
	rel->consider_parallel = true;

	cp = makeNode(CustomPath);
	cp->path.pathtype = T_CustomScan;
	cp->path.parent = rel;
	cp->path.pathtarget = rel->reltarget;
	cp->path.param_info = NULL;
	cp->path.parallel_aware = true;
	cp->path.parallel_safe = true;
	cp->path.parallel_workers = workers;
	cp->path.rows = clamp_row_est(tuples / divisor);
	cp->path.startup_cost = 0;
	/* a parallel sequential scan's cost, with one call per key */
	cp->path.total_cost = pages * seq_page_cost +
		tuples * (cpu_tuple_cost + cpu_operator_cost) / divisor;
	cp->path.pathkeys = NIL;
	cp->flags = CUSTOMPATH_SUPPORT_PROJECTION;
	cp->custom_paths = NIL;
	cp->custom_private = NIL;
	cp->methods = &new_keys_path_methods;
	add_partial_path(rel, &cp->path);
}

static Plan *
new_keys_plan(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
			  List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cs = makeNode(CustomScan);
	RangeTblEntry *rte = planner_rt_fetch(rel->relid, root);
	FuncExpr   *call = (FuncExpr *) ((RangeTblFunction *) linitial(rte->functions))->funcexpr;

	cs->scan.plan.targetlist = tlist;
	cs->scan.plan.qual = extract_actual_clauses(clauses, false);
	/* no relation to open: the scan tuple is the function's one column */
	cs->scan.scanrelid = 0;
	cs->custom_scan_tlist =
		list_make1(makeTargetEntry((Expr *) makeVar(rel->relid, 1, INT8OID, -1, InvalidOid, 0),
								   1, NULL, false));
	cs->custom_relids = bms_copy(rel->relids);
	cs->flags = best_path->flags;
	cs->custom_plans = NIL;
	cs->custom_exprs = copyObject(call->args);
	cs->custom_private = NIL;
	cs->methods = &new_keys_scan_methods;
	return &cs->scan.plan;
}

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
	Stream	   *st = ns->feed.stream;
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
			cpht_relfeed_finish(&ns->feed);
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
		cpht_relfeed_finish(&ns->feed);
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

	/* the planner puts the node where nothing rescans it (see above) */
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
	char		table[NAMEDATALEN];

	if (ns->null_arg)
		return;
	relname = get_rel_name(ns->relid);
	if (relname != NULL)
		ExplainPropertyText("Relation", relname, es);
	ExplainPropertyText("Key Column", NameStr(ns->key_column), es);
	/* the shared table's name, as the call may have given it */
	if (cpht_shared_name(ns->handle, table))
		ExplainPropertyText("Table", table, es);
	else
		ExplainPropertyInteger("Table", NULL, ns->handle, es);

	/* ANALYZE: what every participant sent, and the table's time on it */
	if (es->analyze && ns->started)
	{
		ExplainPropertyUInteger("Keys Sent", NULL, ns->sent_keys, es);
		ExplainPropertyUInteger("New Keys", NULL, ns->sent_new, es);
		ExplainPropertyFloat("Time in Table", "ms", (double) ns->sent_us / 1000.0, 3, es);
	}
}

void
cpht_new_keys_init(void)
{
	new_keys_path_methods.CustomName = NODE_NAME;
	new_keys_path_methods.PlanCustomPath = new_keys_plan;

	new_keys_scan_methods.CustomName = NODE_NAME;
	new_keys_scan_methods.CreateCustomScanState = new_keys_create_state;
	RegisterCustomScanMethods(&new_keys_scan_methods);

	new_keys_exec_methods.CustomName = NODE_NAME;
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

	prev_set_rel_pathlist = set_rel_pathlist_hook;
	set_rel_pathlist_hook = new_keys_pathlist;
}
