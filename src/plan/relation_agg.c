/*
 * relation_agg.c — cpht_fop_agg over a whole relation, planned as
 * cpht_fop_relation.
 *
 *     SELECT cpht_fop_agg('seen_ids', id) FROM staging
 *
 * is the first query every ingest writes.  As an aggregate, each row costs
 * a transition call in a parallel worker, and the workers' batches meet in
 * the cpht worker one after another as the scan ends.  cpht_fop_relation
 * reads the same column by a parallel scan of cpht's own with no call per
 * row (stream/heap_feed.c), faster than count(id) of the same rows.  So
 * the planner hook (hooks.c) hands every top-level query here first, and
 * one of exactly that shape becomes
 *
 *     SELECT cpht_fop_relation('seen_ids', 'staging'::regclass, 'id')
 *
 * When.  A SELECT whose one output column is cpht_fop_agg(h, col) with
 * neither FILTER, ORDER BY nor DISTINCT; FROM one plain heap table of no
 * children and nothing else (not FROM ONLY; no WHERE, GROUP BY, HAVING,
 * ORDER BY, LIMIT, WITH, window, locking clause or TABLESAMPLE, no
 * row-level security policy that applies; a role that may run both
 * cpht_fop_agg and cpht_fop_relation; the aggregate cpht's own, with its
 * final function); col a bigint column of that table as written (not an
 * expression or a cast); h an expression of no column, aggregate,
 * subquery or set-returning function.  Any other query keeps its
 * aggregate.  The setting cpht.fop_agg_relation_scan (on) turns the
 * rewrite off.
 *
 * Why the answer is the same.  Both send the column's non-NULL keys to
 * the table in batches of cpht.batch_size, check each against the table's
 * key_bits, and count the new ones; over no rows both give 0.  The table
 * stays in the query's range table, though nothing scans it there: the
 * executor still checks the role's SELECT on the column and takes the
 * table's lock, as for the aggregate's plan; cpht_fop_relation checks the
 * privilege again and reads the table by its own parallel heap scan
 * under the statement's snapshot (a cursor's, for a cursor), which is
 * what the aggregate's scan reads (stream/heap_feed.c).
 * h is evaluated once rather than for every row, which the aggregate
 * requires to give the same handle anyway: with h = cpht_open('seen_ids')
 * written inline, that is one open and a parallel scan, where the
 * aggregate could only run serially.  What differs: a NULL h gives NULL
 * (cpht_fop_relation is STRICT) where the aggregate fails on its first
 * row, and an h that fails fails even over an empty table, whose
 * aggregate never evaluates it.
 *
 * Since the rewrite depends on the role's EXECUTE privileges, its plan
 * is marked as depending on the role (PlannedStmt.dependsOnRole, set by
 * cpht_planner): a plan cached for one role (a prepared statement, a
 * PL/pgSQL query) is planned again when another role runs it.
 *
 * EXPLAIN shows the "cpht call" node (call_node.c) where the aggregate's
 * plan showed Aggregate, Gather and a scan.
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "parser/parse_func.h"
#include "miscadmin.h"
#include "rewrite/rewriteManip.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "guc.h"
#include "plan/plan.h"
#include "plan/plan_internal.h"
#include "plan/plan_util.h"
#include "stream/stream.h"

/* cpht_fop_relation(handle_type, regclass, name) in the schema of the
 * aggregate, or InvalidOid (an older version, or not ours). */
static Oid
relation_function(Oid aggfnoid, Oid handle_type)
{
	char	   *schema = get_namespace_name(get_func_namespace(aggfnoid));
	Oid			argtypes[3] = {handle_type, REGCLASSOID, NAMEOID};
	Oid			fn;

	if (schema == NULL)
		return InvalidOid;
	fn = LookupFuncName(list_make2(makeString(schema), makeString("cpht_fop_relation")),
						3, argtypes, true);
	if (!OidIsValid(fn) || !cpht_function_is(fn, cpht_plan_entry.fop_relation))
		return InvalidOid;
	return fn;
}

/* Whether the query, apart from its output, is "SELECT ... FROM table". */
static bool
plain_scan_of_one_table(Query *parse)
{
	RangeTblRef *ref;
	RangeTblEntry *rte;

	if (parse->commandType != CMD_SELECT || parse->utilityStmt != NULL ||
		parse->hasWindowFuncs || parse->hasTargetSRFs || parse->hasSubLinks ||
		parse->hasDistinctOn || parse->hasRecursive || parse->hasModifyingCTE ||
		parse->hasForUpdate || parse->hasRowSecurity || parse->cteList != NIL ||
		parse->groupClause != NIL || parse->groupingSets != NIL || parse->groupDistinct ||
		parse->havingQual != NULL || parse->windowClause != NIL ||
		parse->distinctClause != NIL || parse->sortClause != NIL ||
		parse->limitOffset != NULL || parse->limitCount != NULL ||
		parse->rowMarks != NIL || parse->setOperations != NULL ||
		list_length(parse->rtable) != 1 || parse->jointree == NULL ||
		parse->jointree->quals != NULL || list_length(parse->jointree->fromlist) != 1)
		return false;
	ref = linitial(parse->jointree->fromlist);
	if (!IsA(ref, RangeTblRef) || ref->rtindex != 1)
		return false;
	rte = linitial(parse->rtable);
	/* not FROM ONLY: cpht_fop_relation reads a table's children too */
	return rte->rtekind == RTE_RELATION && rte->relkind == RELKIND_RELATION &&
		rte->inh && rte->tablesample == NULL && rte->securityQuals == NIL;
}

/*
 * Whether cpht_fop_relation reads the table by its own heap scan, under
 * the statement's snapshot, as the aggregate's scan reads it.  A relation
 * the query route would read (an inheritance parent, say) keeps its
 * aggregate: that route reads under a snapshot of its own
 * (stream/query_feed.c).  A child added later invalidates the plan with
 * the parent's relcache entry.  The parser holds the table's lock.
 */
static bool
read_by_heap_scan(Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	bool		heap_scan = cpht_relscan_reads_all(rel);

	relation_close(rel, NoLock);
	return heap_scan;
}

bool
cpht_fop_agg_relation_rewrite(Query *parse)
{
	TargetEntry *te;
	Aggref	   *agg;
	Node	   *handle;
	Var		   *key;
	RangeTblEntry *rte;
	Oid			fn;
	NameData   *column;
	FuncExpr   *call;

	if (!cpht_fop_agg_relation_scan || !parse->hasAggs ||
		list_length(parse->targetList) != 1 || !plain_scan_of_one_table(parse))
		return false;
	te = linitial(parse->targetList);
	if (te->resjunk || !IsA(te->expr, Aggref))
		return false;
	agg = (Aggref *) te->expr;
	if (agg->aggfilter != NULL || agg->aggorder != NIL || agg->aggdistinct != NIL ||
		agg->aggdirectargs != NIL || agg->aggstar || agg->aggvariadic ||
		agg->aggkind != AGGKIND_NORMAL || agg->agglevelsup != 0 ||
		list_length(agg->args) != 2 ||
		/* cpht_fop_agg, not cpht_fop_new_agg (whose answer is the keys),
		 * nor an aggregate of another final function over cpht's step */
		agg->aggtype != INT8OID ||
		!cpht_aggregate_is(agg->aggfnoid, cpht_fop_agg_step, cpht_fop_agg_final))
		return false;
	handle = (Node *) ((TargetEntry *) linitial(agg->args))->expr;
	key = (Var *) ((TargetEntry *) lsecond(agg->args))->expr;
	if (!IsA(key, Var) || key->varno != 1 || key->varlevelsup != 0 ||
		key->varattno <= 0 || key->vartype != INT8OID)
		return false;
	if ((IsA(handle, Const) && ((Const *) handle)->constisnull) ||
		contain_var_clause(handle) || contain_agg_clause(handle) ||
		contain_windowfuncs(handle) || expression_returns_set(handle) ||
		checkExprHasSubLink(handle))
		return false;
	rte = linitial(parse->rtable);
	if (!read_by_heap_scan(rte->relid))
		return false;
	fn = relation_function(agg->aggfnoid, exprType(handle));
	/*
	 * A role that may not run cpht_fop_relation keeps the aggregate; one
	 * that may not run the aggregate keeps it too, and fails on it as
	 * before.  The plan then depends on the role (cpht_planner marks it),
	 * so a cached one is made again for another role.
	 */
	if (!OidIsValid(fn) || pg_proc_aclcheck(fn, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK ||
		pg_proc_aclcheck(agg->aggfnoid, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		return false;

	column = palloc0(sizeof(NameData));
	namestrcpy(column, get_attname(rte->relid, key->varattno, false));
	call = makeFuncExpr(fn, INT8OID,
						list_make3(handle,
								   makeConst(REGCLASSOID, -1, InvalidOid, sizeof(Oid),
											 ObjectIdGetDatum(rte->relid), false, true),
								   makeConst(NAMEOID, -1, C_COLLATION_OID, NAMEDATALEN,
											 NameGetDatum(column), false, false)),
						InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	call->location = agg->location;
	te->expr = (Expr *) call;
	parse->hasAggs = false;
	/* the table stays in the range table, for the executor's privilege
	 * check and its lock; nothing scans it */
	parse->jointree->fromlist = NIL;
	return true;
}
