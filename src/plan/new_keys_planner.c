/*
 * new_keys_planner.c — planning "cpht new keys" (new_keys.h): which calls
 * it recognises (cpht_fop_new_relation, a handle or a cpht_table), the
 * set_rel_pathlist hook that offers the node as a partial path where it
 * qualifies, its costs against the function scan, and the plan it makes.
 *
 * Invariants: the node is offered only where nothing rescans it (the one
 * relation of a top-level query) and only over a shared table this session
 * has open; the plan depends on the relation (relationOids) and, where the
 * relation's policies do not bind the role, on the role (dependsOnRole).
 * Locking: the relation is opened with AccessShareLock while planning, as
 * the planner locks what it plans to scan, and the lock is kept to the end
 * of the transaction.  It tells api/'s functions by the addresses _PG_init
 * handed to plan/ (cpht_plan_entry), and never calls them.
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/plancat.h"
#include "optimizer/restrictinfo.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"

#include "plan/plan.h"
#include "plan/plan_internal.h"
#include "plan/plan_util.h"
#include "plan/new_keys.h"
#include "session/session.h"
#include "stream/stream.h"

static set_rel_pathlist_hook_type prev_set_rel_pathlist = NULL;

static CustomPathMethods new_keys_path_methods;

/* ---- which calls --------------------------------------------------------- */

bool
cpht_is_fop_new_relation(Oid funcid)
{
	return cpht_function_is(funcid, cpht_plan_entry.fop_new_relation);
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
	return cpht_function_is(typinput, cpht_plan_entry.table_in);
}

/*
 * Here, with the other recognition of api/'s functions, for hooks.c too: a
 * cpht_table holds the handle of the table it names, the same number in
 * every session.
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
		((CustomScan *) plan)->methods == &cpht_new_keys_scan_methods;
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
	CphtHandleEntry *h;
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
	if (h == NULL || cpht_tableref_shared_entry(h->shared_tableref) < 0)
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
	cs->methods = &cpht_new_keys_scan_methods;
	return &cs->scan.plan;
}

void
cpht_new_keys_init(void)
{
	new_keys_path_methods.CustomName = CPHT_NEW_KEYS_NODE_NAME;
	new_keys_path_methods.PlanCustomPath = new_keys_plan;
	cpht_new_keys_exec_init();

	prev_set_rel_pathlist = set_rel_pathlist_hook;
	set_rel_pathlist_hook = new_keys_pathlist;
}
