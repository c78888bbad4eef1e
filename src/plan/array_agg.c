/*
 * array_agg.c — array_agg(bigint) handed to an array function of cpht is
 * planned as cpht_array_agg(bigint), which runs in parallel workers
 * (api/array_agg.c); array_agg of PostgreSQL 15 has no combine function.
 *
 * When.  An argument `keys` of cpht_fop, cpht_fop_new, cpht_find or
 * cpht_put that is, as written,
 *     array_agg(x)                          x bigint
 *     (SELECT array_agg(x) FROM ...)        the scalar subquery's only column
 * with neither ORDER BY nor DISTINCT inside the call (FILTER is kept), is
 * rewritten to cpht_array_agg(x), with the same FILTER.  Any other form
 * (an array_agg read through a subquery's or CTE's column, array_agg with
 * ORDER BY or DISTINCT, an array_agg over another type, a window's
 * array_agg) is left as it is.  The rewrite happens wherever the extension's
 * library is loaded in the session (it is, once a table was created or
 * opened in it, and always when preloaded).
 *
 * Why the answer stays aligned.  The two aggregates give the same value up
 * to the order of its elements, which array_agg without ORDER BY leaves
 * unspecified; the array function answers in the order of the array it
 * receives.  Where the query also reads the array — the same
 * array_agg(x) elsewhere in the same query level, as in
 *     SELECT array_agg(id), cpht_fop(h, array_agg(id)) FROM staging
 * — every equal array_agg of that level is rewritten too, so that the
 * planner still computes them once (equal aggregate calls share one
 * state) and the user's array is the one the function saw.  An array_agg
 * that is not rewritten (one with ORDER BY, say) keeps the whole query
 * level from partial aggregation, since array_agg has no combine function;
 * all of that level's aggregates then read the same rows in the same order,
 * so its arrays stay aligned with the rewritten one's too.  Arrays the
 * function receives from a subquery's column are never rewritten, so the
 * user's unnest of that column and the function see one value.
 *
 * Fused over a shared table.  cpht_fop_new(h, array_agg(x)), with h a
 * constant (or a custom plan's parameter) naming a shared table this
 * session has open and array_agg(x) of the same query level as above, is
 * planned as the aggregate cpht_fop_new_agg(h, x) (stream/fop_new_agg.c)
 * instead, FILTER kept: parallel workers send their keys to the table as
 * they read them and hand the leader only the new ones, and no array of
 * every key is built.  The answer holds the same keys (each new key once;
 * the order is unspecified either way); see fop_new_agg.c for what differs
 * when the statement fails half way.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/dependency.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_func.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "plan/plan.h"
#include "plan/plan_internal.h"
#include "plan/plan_util.h"
#include "session/session.h"

/* The array functions whose keys argument is rewritten, by C symbol. */
static const char *const consumers[] = {
	"cpht_fop", "cpht_fop_new", "cpht_find", "cpht_put"
};

/* The array functions that write (run in the leader of a parallel plan). */
static const char *const writers[] = {
	"cpht_fop", "cpht_fop_new", "cpht_put"
};

typedef struct RewriteWalk
{
	List	   *queries;		/* the Query being walked first, its parents
								 * after it */
	Oid			extension;		/* cpht's, once looked up */
	Oid			ours;			/* cpht_array_agg(bigint), once looked up */
	bool		looked_up;
	int			rewritten;
	List	   *lift;			/* query levels whose aggregates go into a
								 * subquery of their own (lift()) */
	List	   *lift_depth;		/* their depths (int), to lift the deepest
								 * first */
} RewriteWalk;

/* The C symbol of a function of language C, or NULL. */
static char *
c_symbol(Oid funcid)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	char	   *symbol = NULL;

	if (!HeapTupleIsValid(tup))
		return NULL;
	if (((Form_pg_proc) GETSTRUCT(tup))->prolang == ClanguageId)
	{
		bool		isnull;
		Datum		src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);

		if (!isnull)
			symbol = TextDatumGetCString(src);
	}
	ReleaseSysCache(tup);
	return symbol;
}

/* Whether funcid is a member of extension cpht whose C symbol is one of
 * names. */
static bool
is_cpht_function(Oid funcid, const char *const *names, int nnames)
{
	char	   *symbol = c_symbol(funcid);
	bool		named = false;

	if (symbol == NULL)
		return false;
	for (int i = 0; i < nnames && !named; i++)
		named = strcmp(symbol, names[i]) == 0;
	pfree(symbol);
	if (!named)
		return false;
	return getExtensionOfObject(ProcedureRelationId, funcid) ==
		get_extension_oid("cpht", true);
}

bool
cpht_is_array_writer(Oid funcid)
{
	return is_cpht_function(funcid, writers, lengthof(writers));
}

/* Whether aggfnoid is cpht_array_agg(bigint): its transition function is
 * ours. */
bool
cpht_is_array_agg(Oid aggfnoid)
{
	static const char *const step[] = {"cpht_array_agg_step"};
	Oid			transfn = cpht_aggregate_transfn(aggfnoid);

	return OidIsValid(transfn) && is_cpht_function(transfn, step, 1);
}

/* cpht_array_agg(bigint), in the schema of the extension's function
 * consumer (InvalidOid if it is not there: an older version). */
static Oid
our_aggregate(RewriteWalk *walk, Oid consumer)
{
	if (!walk->looked_up)
	{
		char	   *schema = get_namespace_name(get_func_namespace(consumer));
		Oid			argtype = INT8OID;
		Oid			agg;

		walk->looked_up = true;
		walk->ours = InvalidOid;
		if (schema == NULL)
			return InvalidOid;
		agg = LookupFuncName(list_make2(makeString(schema), makeString("cpht_array_agg")),
							 1, &argtype, true);
		if (OidIsValid(agg) && get_func_prokind(agg) == PROKIND_AGGREGATE &&
			cpht_is_array_agg(agg))
			walk->ours = agg;
	}
	return walk->ours;
}

/* Whether agg is array_agg(bigint) as the rewrite takes it. */
static bool
rewritable(Aggref *agg)
{
	return agg->aggfnoid == F_ARRAY_AGG_ANYNONARRAY &&
		agg->aggtype == INT8ARRAYOID &&
		agg->aggkind == AGGKIND_NORMAL &&
		agg->aggorder == NIL && agg->aggdistinct == NIL &&
		agg->aggdirectargs == NIL && !agg->aggstar && !agg->aggvariadic &&
		list_length(agg->args) == 1 &&
		exprType((Node *) ((TargetEntry *) linitial(agg->args))->expr) == INT8OID;
}

typedef struct Siblings
{
	Aggref	   *like;			/* as written, before the rewrite */
	Oid			ours;
} Siblings;

/* Rewrites the aggregate calls of one query level (not of its subqueries)
 * equal to like. */
static bool
siblings_walker(Node *node, Siblings *s)
{
	if (node == NULL || IsA(node, Query))
		return false;
	if (IsA(node, Aggref) && equal(node, s->like))
		((Aggref *) node)->aggfnoid = s->ours;
	return expression_tree_walker(node, siblings_walker, s);
}

/* Rewrites agg, which belongs to query level owner, and its equals there. */
static void
rewrite(RewriteWalk *walk, Aggref *agg, Query *owner, Oid ours)
{
	if (!rewritable(agg))
		return;
	if (agg->agglevelsup == 0 && owner != NULL)
	{
		Siblings	s;

		s.like = copyObject(agg);
		s.ours = ours;
		(void) query_tree_walker(owner, siblings_walker, &s, 0);
	}
	agg->aggfnoid = ours;
	walk->rewritten++;
}

/*
 * Lifting a query level's aggregates into a subquery.  PostgreSQL gathers
 * partial aggregates in workers only where the whole target list of the
 * aggregating level is parallel safe, and the array functions that write
 * run in the leader (PARALLEL RESTRICTED), so
 *     SELECT cpht_fop(h, cpht_array_agg(id)) FROM staging
 * would still aggregate in one process.  Such a level
 *     SELECT <targets over aggregates> FROM <from> WHERE <where>
 * without GROUP BY, HAVING, window functions, WITH, locking or set
 * operations, becomes
 *     SELECT <targets, each aggregate a column of s>
 *     FROM (SELECT <its distinct aggregates> FROM <from> WHERE <where>) s
 * which computes one row as before: all aggregates of the level in one
 * aggregation over the same rows (so arrays it gathers stay aligned with
 * each other), and the targets, cpht's calls included, evaluated once over
 * it, in the leader.
 */
typedef struct Lift
{
	int			depth;			/* of the node being visited, below the
								 * lifted level */
	bool		ok;				/* no column of the level outside an
								 * aggregate */
	List	   *aggs;			/* the level's distinct aggregates, as at
								 * its own level */
	Oid			ours;
} Lift;

/* Whether the level's expressions read its relations only through its own
 * aggregates (the parser's rule without GROUP BY; checked, not assumed). */
static bool
lift_check_walker(Node *node, Lift *c)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		bool		done;

		c->depth++;
		done = query_tree_walker((Query *) node, lift_check_walker, c,
								 QTW_EXAMINE_RTES_BEFORE);
		c->depth--;
		return done;
	}
	if (IsA(node, RangeTblEntry))
	{
		/* its expressions are walked after it */
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_CTE && rte->ctelevelsup == c->depth)
		{
			c->ok = false;
			return true;
		}
		return false;
	}
	if (IsA(node, Aggref) && ((Aggref *) node)->agglevelsup == c->depth)
		return false;
	if ((IsA(node, Var) && ((Var *) node)->varlevelsup == c->depth) ||
		(IsA(node, GroupingFunc) && ((GroupingFunc *) node)->agglevelsup == c->depth))
	{
		c->ok = false;
		return true;
	}
	return expression_tree_walker(node, lift_check_walker, c);
}

static Node *
lift_mutator(Node *node, Lift *c)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Query))
	{
		Node	   *done;

		c->depth++;
		done = (Node *) query_tree_mutator((Query *) node, lift_mutator, c,
										   QTW_DONT_COPY_QUERY);
		c->depth--;
		return done;
	}
	if (IsA(node, Aggref) && ((Aggref *) node)->agglevelsup == c->depth)
	{
		Aggref	   *agg = (Aggref *) node;
		Aggref	   *own = copyObject(agg);
		int			column = 0;
		ListCell   *lc;

		/* as the aggregate reads at its own level */
		if (c->depth > 0)
			IncrementVarSublevelsUp((Node *) own, -c->depth, 0);
		foreach(lc, c->aggs)
		{
			column++;
			if (equal(lfirst(lc), own))
				break;
		}
		if (lc == NULL)
		{
			c->aggs = lappend(c->aggs, own);
			column = list_length(c->aggs);
		}
		return (Node *) makeVar(1, column, agg->aggtype, -1, agg->aggcollid, c->depth);
	}
	return expression_tree_mutator(node, lift_mutator, c);
}

static void
lift(Query *q)
{
	Lift		c;
	Query	   *sub;
	RangeTblEntry *rte;
	RangeTblRef *ref;
	List	   *colnames = NIL;
	List	   *tlist = NIL;
	List	   *targets;
	int			i = 0;
	ListCell   *lc;

	if (q->commandType != CMD_SELECT || q->utilityStmt != NULL || !q->hasAggs ||
		q->groupClause != NIL || q->groupingSets != NIL || q->havingQual != NULL ||
		q->hasWindowFuncs || q->cteList != NIL || q->rowMarks != NIL ||
		q->setOperations != NULL || q->hasForUpdate)
		return;
	memset(&c, 0, sizeof(c));
	c.ok = true;
	(void) lift_check_walker((Node *) q->targetList, &c);
	if (!c.ok)
		return;
	targets = (List *) lift_mutator((Node *) q->targetList, &c);
	if (c.aggs == NIL)
		return;

	foreach(lc, c.aggs)
	{
		char	   *name = psprintf("agg%d", ++i);

		tlist = lappend(tlist, makeTargetEntry((Expr *) lfirst(lc), i, name, false));
		colnames = lappend(colnames, makeString(name));
	}
	sub = makeNode(Query);
	sub->commandType = CMD_SELECT;
	sub->querySource = QSRC_ORIGINAL;
	sub->canSetTag = true;
	sub->rtable = q->rtable;
	sub->jointree = q->jointree;
	sub->targetList = tlist;
	sub->hasAggs = true;
	sub->hasSubLinks = q->hasSubLinks;
	sub->stmt_location = -1;
	/* one level deeper: what it reads of the levels above q */
	IncrementVarSublevelsUp((Node *) sub, 1, 1);

	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_SUBQUERY;
	rte->subquery = sub;
	rte->eref = makeAlias("cpht_aggregates", colnames);
	rte->inFromCl = true;
	ref = makeNode(RangeTblRef);
	ref->rtindex = 1;

	q->rtable = list_make1(rte);
	q->jointree = makeFromExpr(list_make1(ref), NULL);
	q->targetList = targets;
	q->hasAggs = false;
}

/* The expression of a scalar subquery's only column, if it has one. */
static Node *
sublink_column(SubLink *sub)
{
	Query	   *q;
	TargetEntry *only = NULL;
	ListCell   *lc;

	if (sub->subLinkType != EXPR_SUBLINK || !IsA(sub->subselect, Query))
		return NULL;
	q = (Query *) sub->subselect;
	if (q->setOperations != NULL)
		return NULL;
	foreach(lc, q->targetList)
	{
		TargetEntry *tle = (TargetEntry *) lfirst(lc);

		if (tle->resjunk)
			continue;
		if (only != NULL)
			return NULL;
		only = tle;
	}
	return only != NULL ? (Node *) only->expr : NULL;
}

static bool
rewrite_walker(Node *node, RewriteWalk *walk)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		bool		done;

		walk->queries = lcons(node, walk->queries);
		done = query_tree_walker((Query *) node, rewrite_walker, walk, 0);
		walk->queries = list_delete_first(walk->queries);
		return done;
	}
	if (IsA(node, FuncExpr))
	{
		FuncExpr   *f = (FuncExpr *) node;
		Node	   *keys = list_length(f->args) == 2 ? lsecond(f->args) : NULL;

		if (keys != NULL && (IsA(keys, Aggref) || IsA(keys, SubLink)) &&
			is_cpht_function(f->funcid, consumers, lengthof(consumers)))
		{
			Oid			ours = our_aggregate(walk, f->funcid);

			if (OidIsValid(ours) && IsA(keys, Aggref))
			{
				Aggref	   *agg = (Aggref *) keys;

				Query	   *owner = agg->agglevelsup < list_length(walk->queries)
					? list_nth(walk->queries, agg->agglevelsup) : NULL;

				if (rewritable(agg) && owner != NULL &&
					!list_member_ptr(walk->lift, owner))
				{
					walk->lift = lappend(walk->lift, owner);
					walk->lift_depth = lappend_int(walk->lift_depth,
												   list_length(walk->queries) - agg->agglevelsup);
				}
				rewrite(walk, agg, owner, ours);
			}
			else if (OidIsValid(ours))
			{
				SubLink    *sub = (SubLink *) keys;
				Node	   *col = sublink_column(sub);

				if (col != NULL && IsA(col, Aggref) && ((Aggref *) col)->agglevelsup == 0)
					rewrite(walk, (Aggref *) col, (Query *) sub->subselect, ours);
			}
		}
	}
	return expression_tree_walker(node, rewrite_walker, walk);
}

/* ---- cpht_fop_new(h, array_agg(x)) as cpht_fop_new_agg(h, x) ----------- */

typedef struct Fuse
{
	ParamListInfo params;
	int			fused;
} Fuse;

/* cpht_fop_new_agg(handle_type, bigint) in the schema of the extension's
 * function fop_new, or InvalidOid (an older version, or not ours). */
static Oid
fused_aggregate(Oid fop_new, Oid handle_type)
{
	static const char *const step[] = {"cpht_fop_new_agg_step"};
	char	   *schema = get_namespace_name(get_func_namespace(fop_new));
	Oid			argtypes[2] = {handle_type, INT8OID};
	Oid			agg;
	Oid			transfn;

	if (schema == NULL)
		return InvalidOid;
	agg = LookupFuncName(list_make2(makeString(schema), makeString("cpht_fop_new_agg")),
						 2, argtypes, true);
	if (!OidIsValid(agg) || get_func_prokind(agg) != PROKIND_AGGREGATE)
		return InvalidOid;
	transfn = cpht_aggregate_transfn(agg);
	return OidIsValid(transfn) && is_cpht_function(transfn, step, 1) ? agg : InvalidOid;
}

/* The aggregate call that replaces f, or NULL when f is not fused. */
static Aggref *
fuse(FuncExpr *f, Fuse *w)
{
	static const char *const fop_new[] = {"cpht_fop_new"};
	Node	   *handle;
	Aggref	   *agg;
	int32		value;
	CphtHandleEntry *h;
	Oid			fused;
	TargetEntry *key;

	if (list_length(f->args) != 2 || !IsA(lsecond(f->args), Aggref))
		return NULL;
	handle = linitial(f->args);
	agg = (Aggref *) lsecond(f->args);
	if (!rewritable(agg) || agg->agglevelsup != 0 ||
		!is_cpht_function(f->funcid, fop_new, 1))
		return NULL;
	/* a shared table this session has open: the parallel plan's condition */
	if (!cpht_plan_handle(handle, w->params, &value) ||
		(h = cpht_shared_lookup(value)) == NULL || cpht_tableref_shared_entry(h->shared_tableref) < 0)
		return NULL;
	fused = fused_aggregate(f->funcid, exprType(handle));
	if (!OidIsValid(fused))
		return NULL;
	key = (TargetEntry *) linitial(agg->args);
	key->resno = 2;
	agg->aggfnoid = fused;
	agg->aggargtypes = list_make2_oid(exprType(handle), INT8OID);
	agg->args = list_make2(makeTargetEntry((Expr *) copyObject(handle), 1, NULL, false), key);
	agg->location = f->location;
	w->fused++;
	return agg;
}

static Node *
fuse_mutator(Node *node, Fuse *w)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Query))
		return (Node *) query_tree_mutator((Query *) node, fuse_mutator, w, QTW_DONT_COPY_QUERY);
	if (IsA(node, FuncExpr))
	{
		Aggref	   *agg = fuse((FuncExpr *) node, w);

		if (agg != NULL)
			return (Node *) agg;
	}
	return expression_tree_mutator(node, fuse_mutator, w);
}

int
cpht_fop_new_fuse(Query *parse, ParamListInfo params)
{
	Fuse		w;

	w.params = params;
	w.fused = 0;
	(void) query_tree_mutator(parse, fuse_mutator, &w, QTW_DONT_COPY_QUERY);
	return w.fused;
}

int
cpht_array_agg_rewrite(Query *parse)
{
	RewriteWalk walk;

	memset(&walk, 0, sizeof(walk));
	(void) rewrite_walker((Node *) parse, &walk);
	/* the deepest first: lifting a level moves the levels inside it */
	for (int depth = 64; depth > 0 && walk.lift != NIL; depth--)
	{
		ListCell   *lq;
		ListCell   *ld;

		forboth(lq, walk.lift, ld, walk.lift_depth)
			if (lfirst_int(ld) == depth)
				lift((Query *) lfirst(lq));
	}
	return walk.rewritten;
}
