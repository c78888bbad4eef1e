/*
 * parallel_plan.h — cpht_fop_agg in parallel workers (parallel_plan.c):
 * which queries may run in parallel, the leader's transaction id before
 * workers start, and the leader's shared-table handles in the workers.
 */
#ifndef CPHT_PARALLEL_PLAN_H
#define CPHT_PARALLEL_PLAN_H

#include "fmgr.h"
#include "nodes/params.h"

/* Installs the planner and executor hooks and the setting that carries
 * the leader's handles (from _PG_init). */
extern void cpht_parallel_init(void);

/* In a parallel worker: registers the leader's shared table of this
 * handle under the same handle, unless already done; ERROR when the
 * leader had no shared table of that handle. */
extern void cpht_parallel_adopt_handle(int32 handle);

/* Whether funcid is the C function fn of this library, whatever schema
 * holds its SQL declaration. */
extern bool cpht_function_is(Oid funcid, PGFunction fn);

/* The value of type that expr has for every row, where the plan can tell:
 * a constant, or a parameter a custom plan is made for. */
extern bool cpht_plan_constant(Node *expr, ParamListInfo params, Oid type, Datum *value);

#endif							/* CPHT_PARALLEL_PLAN_H */
