/*
 * call_node.c — the "cpht call" custom scan: a query that is one call of
 * cpht_insert_new or cpht_fop_relation and nothing else
 *     SELECT cpht_insert_new(h, 'staging', 'items', 'id')
 * is planned by PostgreSQL as a bare Result, whose EXPLAIN ANALYZE says
 * nothing of the call's work.  Under EXPLAIN (the ExplainOneQuery hook,
 * which plans the query as EXPLAIN would), this node takes the Result's
 * place: it evaluates the same target list once, as the Result would.
 * EXPLAIN shows the call's constant arguments by what they are (the table,
 * by its name where it has one, the relations, the key column), and
 * EXPLAIN ANALYZE what the call sent to its table (the streams of this
 * backend, stream/batches.c): keys sent, new keys, the time in the table's
 * calls.  cpht_fop_agg over a whole table is planned as cpht_fop_relation
 * (relation_agg.c), so its EXPLAIN is this node too.
 *
 * Only EXPLAIN gets the node: a query run otherwise keeps its Result,
 * which PL/pgSQL requires of a simple expression (x := cpht_insert_new(...)
 * fails with any other plan node).  Only a Result with no input, no
 * one-time filter and a target list that calls one of the two at its top
 * is replaced.  The node has no scan relation and no child: its target
 * list is the Result's, already set up by the planner (it holds no Var).
 * Another module's ExplainOneQuery hook, loaded first, keeps its place
 * and the Result stays.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "executor/nodeCustom.h"
#include "nodes/extensible.h"
#include "nodes/nodeFuncs.h"
#include "portability/instr_time.h"
#include "tcop/tcopprot.h"
#include "utils/lsyscache.h"

#include "plan/plan.h"
#include "plan/plan_util.h"
#include "stream/stream.h"

#define NODE_NAME "cpht call"

static ExplainOneQuery_hook_type prev_explain_one_query = NULL;
static CustomScanMethods call_scan_methods;
static CustomExecMethods call_exec_methods;

typedef struct CallState
{
	CustomScanState css;
	bool		done;			/* the one row was returned */
	bool		ran;
	CphtBatchStreamTotals before;
	CphtBatchStreamTotals after;
} CallState;

/* Whether expr is a call of cpht_insert_new or cpht_fop_relation. */
static bool
is_long_call(Expr *expr)
{
	FuncExpr   *f;

	if (!IsA(expr, FuncExpr))
		return false;
	f = (FuncExpr *) expr;
	return cpht_function_is(f->funcid, cpht_plan_entry.insert_new) ||
		cpht_function_is(f->funcid, cpht_plan_entry.fop_relation);
}

static bool
replaceable(Plan *plan)
{
	Result	   *r;
	ListCell   *lc;

	if (plan == NULL || !IsA(plan, Result))
		return false;
	r = (Result *) plan;
	if (r->resconstantqual != NULL || plan->lefttree != NULL || plan->righttree != NULL ||
		plan->qual != NIL || plan->initPlan != NIL)
		return false;
	foreach(lc, plan->targetlist)
		if (is_long_call(((TargetEntry *) lfirst(lc))->expr))
			return true;
	return false;
}

/* The Result of a query that is one long call, replaced by the node. */
static void
replace_result(PlannedStmt *stmt)
{
	Plan	   *result = stmt->planTree;
	CustomScan *cs;

	if (stmt->commandType != CMD_SELECT || !replaceable(result))
		return;
	cs = makeNode(CustomScan);
	/* the Result's figures and target list, as they are */
	cs->scan.plan.startup_cost = result->startup_cost;
	cs->scan.plan.total_cost = result->total_cost;
	cs->scan.plan.plan_rows = result->plan_rows;
	cs->scan.plan.plan_width = result->plan_width;
	cs->scan.plan.parallel_aware = false;
	cs->scan.plan.parallel_safe = result->parallel_safe;
	cs->scan.plan.plan_node_id = result->plan_node_id;
	cs->scan.plan.targetlist = result->targetlist;
	cs->scan.plan.extParam = result->extParam;
	cs->scan.plan.allParam = result->allParam;
	cs->scan.scanrelid = 0;
	cs->flags = 0;
	cs->custom_scan_tlist = NIL;
	cs->methods = &call_scan_methods;
	stmt->planTree = (Plan *) cs;
}

/*
 * EXPLAIN of one query, as PostgreSQL 15's ExplainOneQuery does it without
 * a hook (planning time and buffers included), with the Result replaced.
 */
static void
call_explain_one_query(Query *query, int cursorOptions, IntoClause *into, ExplainState *es,
					   const char *queryString, ParamListInfo params, QueryEnvironment *queryEnv)
{
	PlannedStmt *plan;
	instr_time	planstart,
				planduration;
	BufferUsage bufusage_start,
				bufusage;

	if (prev_explain_one_query)
	{
		prev_explain_one_query(query, cursorOptions, into, es, queryString, params, queryEnv);
		return;
	}
	if (es->buffers)
		bufusage_start = pgBufferUsage;
	INSTR_TIME_SET_CURRENT(planstart);
	plan = pg_plan_query(query, queryString, cursorOptions, params);
	INSTR_TIME_SET_CURRENT(planduration);
	INSTR_TIME_SUBTRACT(planduration, planstart);
	if (es->buffers)
	{
		memset(&bufusage, 0, sizeof(BufferUsage));
		BufferUsageAccumDiff(&bufusage, &pgBufferUsage, &bufusage_start);
	}
	replace_result(plan);
	ExplainOnePlan(plan, into, es, queryString, params, queryEnv,
				   &planduration, es->buffers ? &bufusage : NULL);
}

static Node *
call_create_state(CustomScan *cs)
{
	CallState  *st = (CallState *) newNode(sizeof(CallState), T_CustomScanState);

	st->css.methods = &call_exec_methods;
	return (Node *) st;
}

static void
call_begin(CustomScanState *node, EState *estate, int eflags)
{
	(void) node;
	(void) estate;
	(void) eflags;
}

/* One row, as the Result: the target list over no input. */
static TupleTableSlot *
call_exec(CustomScanState *node)
{
	CallState  *st = (CallState *) node;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	TupleTableSlot *slot;

	if (st->done)
		return NULL;
	st->done = true;
	ResetExprContext(econtext);
	cpht_batch_stream_totals(&st->before);
	slot = ExecProject(node->ss.ps.ps_ProjInfo);
	cpht_batch_stream_totals(&st->after);
	st->ran = true;
	return slot;
}

static void
call_end(CustomScanState *node)
{
	(void) node;
}

static void
call_rescan(CustomScanState *node)
{
	((CallState *) node)->done = false;
}

/*
 * The call's arguments that the plan holds as constants, by what they are:
 * the table (by its name where it has one), the relations and the key
 * column; a parameter's value is not shown.
 */
static void
explain_arguments(FuncExpr *f, ExplainState *es)
{
	static const char *const fop_relation[] = {"Table", "Relation", "Key Column"};
	static const char *const insert_new[] = {"Table", "Source", "Target", "Key Column"};
	bool		is_fop_relation = cpht_function_is(f->funcid, cpht_plan_entry.fop_relation);
	const char *const *labels = is_fop_relation ? fop_relation : insert_new;
	int			nlabels = is_fop_relation ? lengthof(fop_relation) : lengthof(insert_new);
	int			i = 0;
	ListCell   *lc;

	foreach(lc, f->args)
	{
		Const	   *c = (Const *) lfirst(lc);

		if (i == nlabels)
			break;
		if (IsA(c, Const) && !c->constisnull)
		{
			if (i == 0)
				cpht_plan_explain_table(DatumGetInt32(c->constvalue), es);
			else if (c->consttype == REGCLASSOID)
			{
				char	   *rel = get_rel_name(DatumGetObjectId(c->constvalue));

				if (rel != NULL)
					ExplainPropertyText(labels[i], rel, es);
			}
			else if (c->consttype == NAMEOID)
				ExplainPropertyText(labels[i], NameStr(*DatumGetName(c->constvalue)), es);
		}
		i++;
	}
}

static void
call_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	CallState  *st = (CallState *) node;
	ListCell   *lc;

	foreach(lc, node->ss.ps.plan->targetlist)
	{
		Expr	   *expr = ((TargetEntry *) lfirst(lc))->expr;

		if (is_long_call(expr))
		{
			explain_arguments((FuncExpr *) expr, es);
			break;
		}
	}
	if (!es->analyze || !st->ran)
		return;
	ExplainPropertyUInteger("Keys Sent", NULL, st->after.keys - st->before.keys, es);
	ExplainPropertyUInteger("New Keys", NULL, st->after.new_keys - st->before.new_keys, es);
	ExplainPropertyFloat("Time in Table", "ms", st->after.table_ms - st->before.table_ms, 3, es);
}

void
cpht_call_node_init(void)
{
	call_scan_methods.CustomName = NODE_NAME;
	call_scan_methods.CreateCustomScanState = call_create_state;
	RegisterCustomScanMethods(&call_scan_methods);

	call_exec_methods.CustomName = NODE_NAME;
	call_exec_methods.BeginCustomScan = call_begin;
	call_exec_methods.ExecCustomScan = call_exec;
	call_exec_methods.EndCustomScan = call_end;
	call_exec_methods.ReScanCustomScan = call_rescan;
	call_exec_methods.ExplainCustomScan = call_explain;

	prev_explain_one_query = ExplainOneQuery_hook;
	ExplainOneQuery_hook = call_explain_one_query;
}
