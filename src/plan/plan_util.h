/*
 * plan/plan_util.h — private to plan/: the helpers of plan_util.c that the
 * planner hooks (hooks.c), the custom scans and the array_agg rewrite
 * share.
 */
#ifndef CPHT_PLAN_UTIL_H
#define CPHT_PLAN_UTIL_H

#include "postgres.h"

#include "commands/explain.h"
#include "fmgr.h"
#include "nodes/params.h"
#include "nodes/nodes.h"

#include "plan/plan.h"

/* Whether funcid is the C function fn of this library, whatever schema
 * holds its SQL declaration. */
extern bool cpht_function_is(Oid funcid, PGFunction fn);

/* EXPLAIN's "Table" property of the nodes: a shared table's name, or the
 * handle of a table that has none. */
extern void cpht_plan_explain_table(int32 handle, ExplainState *es);

/* aggfnoid's transition function, or InvalidOid when aggfnoid is no
 * aggregate. */
extern Oid	cpht_aggregate_transfn(Oid aggfnoid);

/* Whether aggfnoid is an aggregate whose transition function is the C
 * function step of this library (cpht_function_is) and whose final
 * function is the C function final of this library: an aggregate that
 * only borrows cpht's step (CREATE AGGREGATE with another final function
 * or none) is not cpht's. */
extern bool cpht_aggregate_is(Oid aggfnoid, PGFunction step, PGFunction final);

/* api/'s functions as _PG_init handed them over (cpht_plan_set_entry_points). */
extern CphtPlanEntryPoints cpht_plan_entry;

/* The value of type that expr has for every row, where the plan can tell:
 * a constant, or a parameter a custom plan is made for. */
extern bool cpht_plan_constant(Node *expr, ParamListInfo params, Oid type, Datum *value);

#endif							/* CPHT_PLAN_UTIL_H */
