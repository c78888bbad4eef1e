/*
 * plan/plan_internal.h — private to plan/: what its files share with each
 * other, the planner hook (hooks.c) calling the rewriters and asking the
 * custom scan's planner what it recognises.  Not a door: no other folder
 * includes it (test/check-layout.sh).
 */
#ifndef CPHT_PLAN_INTERNAL_H
#define CPHT_PLAN_INTERNAL_H

#include "postgres.h"

#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"

/*
 * array_agg.c: array_agg(bigint) handed to an array function of cpht is
 * planned as cpht_array_agg(bigint), which runs in parallel workers.
 */

/* Rewrites parse in place (from the planner hook); returns how many
 * aggregate calls it rewrote, their equals at the same level not counted. */
extern int	cpht_array_agg_rewrite(Query *parse);

/* cpht_fop_new(h, array_agg(x)) over a shared table, as the aggregate
 * cpht_fop_new_agg(h, x); in place (from the planner hook, before
 * cpht_array_agg_rewrite); returns how many calls it fused. */
extern int	cpht_fop_new_fuse(Query *parse, ParamListInfo params);

/*
 * relation_agg.c: SELECT cpht_fop_agg(h, col) FROM table, and nothing
 * else, planned as SELECT cpht_fop_relation(h, table, col).
 */

/* Rewrites parse in place (from the planner hook, before the others);
 * whether it did. */
extern bool cpht_fop_agg_relation_rewrite(Query *parse);

/* Whether aggfnoid is cpht_array_agg(bigint), whatever schema holds it. */
extern bool cpht_is_array_agg(Oid aggfnoid);

/* Whether funcid is one of cpht's array functions that write a table
 * (cpht_fop, cpht_fop_new, cpht_put), whatever schema holds it. */
extern bool cpht_is_array_writer(Oid funcid);

/*
 * new_keys_planner.c: what the "cpht new keys" node's planner recognises.
 */

/* Whether funcid is cpht_fop_new_relation, whatever schema holds it. */
extern bool cpht_is_fop_new_relation(Oid funcid);

/* The handle expr gives for every row where the plan can tell
 * (cpht_plan_constant): an int handle or a cpht_table, which holds one. */
extern bool cpht_plan_handle(Node *expr, ParamListInfo params, int32 *handle);

/* Whether plan is the node. */
extern bool cpht_new_keys_plan(Plan *plan);

#endif							/* CPHT_PLAN_INTERNAL_H */
