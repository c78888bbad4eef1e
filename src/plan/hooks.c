/*
 * hooks.c — cpht_fop_agg in parallel workers (and the new-keys
 * node of new_keys_planner.c and new_keys_exec.c, which relies on the same two things below: whose
 * handles, whose transaction).
 *
 * The aggregate is PARALLEL SAFE so that a scan of a large staging table
 * can feed a shared table from several workers (partial states combined
 * by the leader: stream/fop_agg.c).  Three things make that correct:
 *
 * Which queries.  A session's private table lives in its backend (or is
 * owned by it in the cpht worker), where parallel workers cannot reach
 * it, so the planner hook plans a query in parallel only when every
 * cpht_fop_agg in it names, by a constant or a bound parameter, a shared
 * table this session has open (a handle, or a cpht_table, which holds the
 * handle of the table it names: api/names.c); any other query is planned
 * as if it were not parallel-safe (CURSOR_OPT_PARALLEL_OK cleared), as
 * before.
 *
 * Whose handles.  Handles are numbers of the leader's session.  Before a
 * parallel plan with cpht_fop_agg runs, the executor hook writes the
 * session's open shared tables (handle, catalog entry, table id) into the
 * setting cpht.leader_shared_tables, which PostgreSQL copies into every
 * parallel worker with the leader's other settings; a worker registers the
 * table under the same handle when the aggregate first names it.  The
 * worker checks the role's privileges again, as the leader would.
 *
 * Whose transaction.  Workers act for the leader's transaction: a write
 * on a transactional shared table is tagged with the current transaction
 * and subtransaction ids (client/waits.c), which a parallel worker has
 * from the leader, so the cpht worker (worker/xacts.c, keyed by the top
 * transaction id) records the workers' keys as the leader's pending keys,
 * undone if it rolls back, and a worker meeting another transaction's key
 * waits on that transaction's lock (lock groups make that a wait of the
 * leader's group).  A parallel worker cannot assign transaction ids, so
 * the executor hook assigns the leader's (top and current subtransaction)
 * before parallel mode begins, and notes the transaction as one that
 * writes shared tables: only the leader tells the cpht worker how it ends
 * (parallel workers' transaction callbacks get the PARALLEL_ events, which
 * client/xact_end.c ignores).
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "nodes/nodeFuncs.h"
#include "nodes/params.h"
#include "optimizer/planner.h"
#include "utils/guc.h"

#include "plan/plan.h"
#include "plan/plan_internal.h"
#include "plan/plan_util.h"
#include "stream/stream.h"
#include "guc.h"
#include "session/session.h"
#include "client/client.h"
#include "memcap.h"

static planner_hook_type prev_planner = NULL;
static ExecutorStart_hook_type prev_executor_start = NULL;

/* Whether an aggregate is cpht_fop_agg or cpht_fop_new_agg, which write
 * their table from parallel workers alike, whatever schema holds it: its
 * transition function is ours. */
static bool
is_fop_agg(Oid aggfnoid)
{
	Oid			transfn = cpht_aggregate_transfn(aggfnoid);

	return OidIsValid(transfn) &&
		(cpht_function_is(transfn, cpht_fop_agg_step) ||
		 cpht_function_is(transfn, cpht_fop_new_agg_step));
}

/* ---- planning ------------------------------------------------------------ */

typedef struct PlanCheck
{
	ParamListInfo params;
	bool		refuse;			/* a cpht_fop_agg that must not go parallel */
} PlanCheck;

static bool
plan_check_walker(Node *node, PlanCheck *check)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, plan_check_walker, check, 0);
	if (IsA(node, Aggref) && is_fop_agg(((Aggref *) node)->aggfnoid))
	{
		Aggref	   *agg = (Aggref *) node;
		int32		handle;
		CphtHandleEntry *h;

		if (list_length(agg->args) < 1 ||
			!cpht_plan_handle((Node *) ((TargetEntry *) linitial(agg->args))->expr,
							  check->params, &handle) ||
			(h = cpht_shared_lookup(handle)) == NULL || cpht_tableref_shared_entry(h->shared_tableref) < 0)
		{
			check->refuse = true;
			return true;
		}
	}
	return expression_tree_walker(node, plan_check_walker, check);
}

static PlannedStmt *
cpht_planner(Query *parse, const char *query_string, int cursor_options,
			 ParamListInfo bound_params)
{
	bool		by_relation;
	PlannedStmt *result;

	/* cpht_fop_agg(h, col) over a whole table: the relation's own scan
	 * (relation_agg.c) */
	by_relation = cpht_fop_agg_relation_rewrite(parse);
	/* array_agg(bigint) into an array function: one that runs in parallel
	 * workers (array_agg.c); over a shared table, cpht_fop_new's keys go to
	 * the table from the workers */
	(void) cpht_fop_new_fuse(parse, bound_params);
	(void) cpht_array_agg_rewrite(parse);

	if ((cursor_options & CURSOR_OPT_PARALLEL_OK) != 0)
	{
		PlanCheck	check;

		check.params = bound_params;
		check.refuse = false;
		(void) query_tree_walker(parse, plan_check_walker, &check, 0);
		if (check.refuse)
			cursor_options &= ~CURSOR_OPT_PARALLEL_OK;
	}
	if (prev_planner)
		result = prev_planner(parse, query_string, cursor_options, bound_params);
	else
		result = standard_planner(parse, query_string, cursor_options, bound_params);
	/* the rewrite checked the role's privileges (relation_agg.c) */
	if (by_relation)
		result->dependsOnRole = true;
	return result;
}

/* ---- execution ----------------------------------------------------------- */

static bool
has_fop_agg_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref) && is_fop_agg(((Aggref *) node)->aggfnoid))
		return true;
	return expression_tree_walker(node, has_fop_agg_walker, context);
}

static bool plan_writes_tables(Plan *plan);

static bool
plans_write_tables(List *plans)
{
	ListCell   *lc;

	foreach(lc, plans)
		if (plan_writes_tables((Plan *) lfirst(lc)))
			return true;
	return false;
}

/* Whether a function scan calls cpht_fop_new_relation. */
static bool
scans_fop_new_relation(FunctionScan *scan)
{
	ListCell   *lc;

	foreach(lc, scan->functions)
	{
		Node	   *call = ((RangeTblFunction *) lfirst(lc))->funcexpr;

		if (IsA(call, FuncExpr) && cpht_is_fop_new_relation(((FuncExpr *) call)->funcid))
			return true;
	}
	return false;
}

/*
 * Whether a plan tree writes cpht tables where parallel mode may be on:
 * cpht_fop_agg in any node, the new-keys node (new_keys_exec.c), or a scan
 * of cpht_fop_new_relation, which runs in the leader of a parallel plan.
 */
static bool
plan_writes_tables(Plan *plan)
{
	if (plan == NULL)
		return false;
	if (cpht_new_keys_plan(plan) ||
		(IsA(plan, FunctionScan) && scans_fop_new_relation((FunctionScan *) plan)))
		return true;
	if (has_fop_agg_walker((Node *) plan->targetlist, NULL) ||
		has_fop_agg_walker((Node *) plan->qual, NULL))
		return true;
	if (plan_writes_tables(plan->lefttree) || plan_writes_tables(plan->righttree))
		return true;
	switch (nodeTag(plan))
	{
		case T_Append:
			return plans_write_tables(((Append *) plan)->appendplans);
		case T_MergeAppend:
			return plans_write_tables(((MergeAppend *) plan)->mergeplans);
		case T_SubqueryScan:
			return plan_writes_tables(((SubqueryScan *) plan)->subplan);
		case T_CustomScan:
			return plans_write_tables(((CustomScan *) plan)->custom_plans);
		default:
			return false;
	}
}

/*
 * The array functions that write (cpht_fop, cpht_fop_new, cpht_put) are
 * PARALLEL RESTRICTED, so that the keys they take can be gathered by
 * parallel workers (array_agg.c): they run in the leader, but while the
 * plan runs, in parallel mode, where no transaction id can be assigned.
 * A write on a transactional shared table needs the leader's ids
 * (client/waits.c), so the executor hook assigns them first, unless every
 * such call names, by a constant or a bound parameter, a private table of
 * this session or a shared table it opened that is not transactional.
 */
typedef struct LeaderWrites
{
	ParamListInfo params;
	bool		need_xid;		/* a call may write a transactional shared
								 * table */
	bool		any;			/* a call at all */
} LeaderWrites;

static bool
leader_writes_walker(Node *node, LeaderWrites *w)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr) && cpht_is_array_writer(((FuncExpr *) node)->funcid))
	{
		FuncExpr   *f = (FuncExpr *) node;
		int32		handle;
		CphtHandleEntry *h;

		w->any = true;
		if (list_length(f->args) < 1 ||
			!cpht_plan_handle((Node *) linitial(f->args), w->params, &handle))
			w->need_xid = true;
		else if (cpht_handle_is_shared(handle) &&
				 ((h = cpht_handles_shared(handle)) == NULL || h->transactional))
			w->need_xid = true;
	}
	return expression_tree_walker(node, leader_writes_walker, w);
}

static void plan_leader_writes(Plan *plan, LeaderWrites *w);

static void
plans_leader_writes(List *plans, LeaderWrites *w)
{
	ListCell   *lc;

	foreach(lc, plans)
		plan_leader_writes((Plan *) lfirst(lc), w);
}

/* The calls in a plan tree's expressions (those a call of a function of
 * the leader can sit in). */
static void
plan_leader_writes(Plan *plan, LeaderWrites *w)
{
	if (plan == NULL)
		return;
	(void) leader_writes_walker((Node *) plan->targetlist, w);
	(void) leader_writes_walker((Node *) plan->qual, w);
	switch (nodeTag(plan))
	{
		case T_Result:
			(void) leader_writes_walker(((Result *) plan)->resconstantqual, w);
			break;
		case T_FunctionScan:
			(void) leader_writes_walker((Node *) ((FunctionScan *) plan)->functions, w);
			break;
		case T_ValuesScan:
			(void) leader_writes_walker((Node *) ((ValuesScan *) plan)->values_lists, w);
			break;
		case T_NestLoop:
		case T_MergeJoin:
		case T_HashJoin:
			(void) leader_writes_walker((Node *) ((Join *) plan)->joinqual, w);
			break;
		case T_Append:
			plans_leader_writes(((Append *) plan)->appendplans, w);
			break;
		case T_MergeAppend:
			plans_leader_writes(((MergeAppend *) plan)->mergeplans, w);
			break;
		case T_SubqueryScan:
			plan_leader_writes(((SubqueryScan *) plan)->subplan, w);
			break;
		case T_CustomScan:
			plans_leader_writes(((CustomScan *) plan)->custom_plans, w);
			break;
		default:
			break;
	}
	plan_leader_writes(plan->lefttree, w);
	plan_leader_writes(plan->righttree, w);
}

/* Writes the session's open shared tables into the setting the workers
 * get; whether any of them is transactional. */
static bool
publish_shared_tables(void)
{
	const int32 *handles;
	int			n = cpht_shared_open_handles(&handles);
	StringInfoData buf;
	bool		transactional = false;

	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
	{
		CphtHandleEntry *h = cpht_handles_shared(handles[i]);
		int32		entry;
		uint64		table_id;

		if (h == NULL)
			continue;
		entry = cpht_tableref_shared_entry(h->shared_tableref);
		table_id = cpht_tableref_shared_table_id(h->shared_tableref);
		/*
		 * A table this session dropped goes to the workers as entry
		 * CPHT_LEADER_DROPPED, and one dropped by this transaction (only
		 * this backend knows the drop is pending) as
		 * CPHT_LEADER_DROP_PENDING: they refuse the handle as the leader
		 * does (cpht_shared_adopt) rather than write into the table or
		 * say that the leader never opened it.
		 */
		if (entry < 0)
			entry = CPHT_LEADER_DROPPED;
		else if (cpht_ddl_drop_pending(entry, table_id))
			entry = CPHT_LEADER_DROP_PENDING;
		appendStringInfo(&buf, "%s%d:%d:" UINT64_FORMAT, buf.len > 0 ? "," : "",
						 h->handle, entry, table_id);
		if (entry >= 0)
			transactional |= h->transactional;
	}
	(void) set_config_option(CPHT_LEADER_SETTING, buf.data, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
	pfree(buf.data);
	return transactional;
}

static void
cpht_executor_start(QueryDesc *query_desc, int eflags)
{
	if (prev_executor_start)
		prev_executor_start(query_desc, eflags);
	else
		standard_ExecutorStart(query_desc, eflags);

	if (!query_desc->plannedstmt->parallelModeNeeded ||
		(eflags & EXEC_FLAG_EXPLAIN_ONLY) != 0 ||
		IsInParallelMode() || IsParallelWorker())
		return;
	{
		LeaderWrites w;

		w.params = query_desc->params;
		w.need_xid = false;
		w.any = false;
		plan_leader_writes(query_desc->plannedstmt->planTree, &w);
		plans_leader_writes(query_desc->plannedstmt->subplans, &w);
		if (w.any)
		{
			/* a cap a superuser set is read now: parallel mode would
			 * refuse setting it (memcap.c) */
			cpht_memory_settle();
			if (w.need_xid && !RecoveryInProgress())
			{
				(void) GetTopTransactionId();
				(void) GetCurrentTransactionId();
			}
		}
	}
	if (!plan_writes_tables(query_desc->plannedstmt->planTree) &&
		!plans_write_tables(query_desc->plannedstmt->subplans))
		return;
	if (publish_shared_tables() && !RecoveryInProgress())
	{
		/*
		 * Workers tag their writes with these ids and cannot assign them;
		 * the leader ends the transaction in the cpht worker even if only
		 * workers wrote.  (In recovery the workers' writes on a
		 * transactional table fail with 25006, as the leader's would.)
		 */
		TransactionId sub = GetCurrentTransactionId();

		cpht_xact_end_note_write(GetTopTransactionId(), sub);
	}
}

void
cpht_parallel_init(void)
{
	prev_planner = planner_hook;
	planner_hook = cpht_planner;
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = cpht_executor_start;
}
