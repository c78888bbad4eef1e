/*
 * plan_util.c — what the planner integration of plan/ asks of a query
 * tree in several places: whether a function (or an aggregate's step) is
 * one of ours, the value an expression has for every row, and how EXPLAIN
 * names a table.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "commands/explain.h"
#include "fmgr.h"
#include "nodes/params.h"
#include "nodes/primnodes.h"
#include "utils/syscache.h"

#include "plan/plan_util.h"
#include "session/session.h"

CphtPlanEntryPoints cpht_plan_entry;

void
cpht_plan_set_entry_points(const CphtPlanEntryPoints *entry)
{
	cpht_plan_entry = *entry;
}

bool
cpht_function_is(Oid funcid, PGFunction fn)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	bool		is_c;
	FmgrInfo	finfo;

	if (fn == NULL || !HeapTupleIsValid(tup))
	{
		if (HeapTupleIsValid(tup))
			ReleaseSysCache(tup);
		return false;
	}
	is_c = ((Form_pg_proc) GETSTRUCT(tup))->prolang == ClanguageId;
	ReleaseSysCache(tup);
	/* only a C function can be ours; fmgr_info of others is not needed */
	if (!is_c)
		return false;
	fmgr_info(funcid, &finfo);
	return finfo.fn_addr == fn;
}

void
cpht_plan_explain_table(int32 handle, ExplainState *es)
{
	char		name[NAMEDATALEN];

	if (cpht_shared_name(handle, name))
		ExplainPropertyText("Table", name, es);
	else
		ExplainPropertyInteger("Table", NULL, handle, es);
}

/* aggfnoid's transition and final functions (InvalidOid: none); false
 * when aggfnoid is no aggregate. */
static bool
aggregate_functions(Oid aggfnoid, Oid *transfn, Oid *finalfn)
{
	HeapTuple	tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));

	if (!HeapTupleIsValid(tup))
		return false;
	*transfn = ((Form_pg_aggregate) GETSTRUCT(tup))->aggtransfn;
	*finalfn = ((Form_pg_aggregate) GETSTRUCT(tup))->aggfinalfn;
	ReleaseSysCache(tup);
	return true;
}

Oid
cpht_aggregate_transfn(Oid aggfnoid)
{
	Oid			transfn,
				finalfn;

	return aggregate_functions(aggfnoid, &transfn, &finalfn) ? transfn : InvalidOid;
}

bool
cpht_aggregate_is(Oid aggfnoid, PGFunction step, PGFunction final)
{
	Oid			transfn,
				finalfn;

	return aggregate_functions(aggfnoid, &transfn, &finalfn) &&
		cpht_function_is(transfn, step) &&
		OidIsValid(finalfn) && cpht_function_is(finalfn, final);
}

bool
cpht_plan_constant(Node *expr, ParamListInfo params, Oid type, Datum *value)
{
	if (IsA(expr, Const))
	{
		Const	   *c = (Const *) expr;

		if (c->constisnull || c->consttype != type)
			return false;
		*value = c->constvalue;
		return true;
	}
	if (IsA(expr, Param) && ((Param *) expr)->paramkind == PARAM_EXTERN && params != NULL)
	{
		Param	   *p = (Param *) expr;
		ParamExternData workspace;
		ParamExternData *prm;

		if (p->paramid <= 0 || p->paramid > params->numParams)
			return false;
		prm = params->paramFetch != NULL ?
			params->paramFetch(params, p->paramid, false, &workspace) :
			&params->params[p->paramid - 1];
		/* only a value the plan is made for (a custom plan's) */
		if (prm == NULL || prm->isnull || prm->ptype != type ||
			(prm->pflags & PARAM_FLAG_CONST) == 0)
			return false;
		*value = prm->value;
		return true;
	}
	return false;
}
