/*
 * plan/plan.h — the door of plan/: planner and executor integration.
 * hooks.c holds the planner and executor hooks (cpht_fop_agg in parallel
 * workers: which queries may run in parallel, the leader's transaction id
 * before workers start, and the leader's shared-table handles in the
 * workers); array_agg.c plans array_agg(bigint) handed to an array
 * function as cpht_array_agg; new_keys_planner.c and new_keys_exec.c the
 * "cpht new keys" custom scan; rows_by_tid_node.c the "cpht rows by tid"
 * custom scan; call_node.c the "cpht call" node of EXPLAIN.
 *
 * Who: cpht.c and api/ may include it (test/check-layout.sh), nothing
 * below them.  _PG_init hands over api/'s entry points
 * (cpht_plan_set_entry_points) and calls the four *_init functions;
 * api/insert_new.c uses cpht_rows_by_tid_plan_for and
 * cpht_rows_by_tid_read_under.  What plan/'s files share with each other
 * is in the private plan/plan_internal.h and plan/plan_util.h.
 *
 * Concurrency: the *_init functions install process-wide hooks, each
 * calling the one it replaced, and register the custom scans: in the
 * postmaster when cpht is preloaded (every process inherits them), else in
 * the backend that loads cpht.  The planner hook and the rewriters run in
 * the backend that plans a query; the nodes run in every participant of a
 * Gather (the leader and its parallel workers), which share only the
 * node's dynamic shared memory, written by the leader before the workers
 * start, and atomics for the totals (new_keys_exec.c); every participant
 * opens the relation with AccessShareLock.  plan/ takes no LWLock or
 * spinlock itself; the session/ calls it makes read the shared catalog
 * under catalog_lock (session/session.h).  The state behind
 * cpht_rows_by_tid_plan_for and _read_under is the backend's own; each
 * returns the value it replaced, for the caller to put back however the
 * statement ends.  Everything here may raise ERROR.
 */
#ifndef CPHT_PLAN_H
#define CPHT_PLAN_H

#include "postgres.h"

#include "fmgr.h"
#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "utils/snapshot.h"

/* Installs the planner and executor hooks (from _PG_init); the setting
 * that carries the leader's handles is defined with the others (guc.c). */
extern void cpht_parallel_init(void);

/*
 * The SQL functions of api/ that plan/ recognises in a query, by the C
 * function behind their pg_proc entries (plan_util.c's cpht_function_is).
 * _PG_init hands them over before it installs the hooks, so that plan/
 * includes nothing of the layer above it; plan/ never calls them.
 */
typedef struct CphtPlanEntryPoints
{
	PGFunction	fop_new_relation;	/* planned as the "cpht new keys" node */
	PGFunction	table_in;		/* the cpht_table type's input function */
	PGFunction	insert_new;		/* explained as the "cpht call" node */
	PGFunction	fop_relation;	/* likewise */
} CphtPlanEntryPoints;

extern void cpht_plan_set_entry_points(const CphtPlanEntryPoints *entry);

/*
 * new_keys_planner.c: cpht_fop_new_relation as a parallel plan node over a
 * shared table (its execution: new_keys_exec.c).
 */

/* Installs the planner hook and registers the node (from _PG_init). */
extern void cpht_new_keys_init(void);

/*
 * rows_by_tid_node.c: the plan node through which cpht_insert_new reads the
 * new rows of its source in the order it chose (rows_by_tid_node.c).
 */

/*
 * While set to a relation (InvalidOid: never), a scan of that relation
 * planned as  SELECT ... FROM ONLY rel WHERE ctid = ANY ($1)  with no other
 * condition (the = of pg_catalog, as OPERATOR(pg_catalog.=) names it), in
 * a top-level INSERT, becomes the node: it returns the rows of the tids in
 * $1 in the array's order, where a TID scan would return them in heap
 * order.  A statement other than an INSERT planned meanwhile
 * (a trigger's query, say) does not get it.  Returns the value it
 * replaces, for the caller to put back.
 */
extern Oid	cpht_rows_by_tid_plan_for(Oid relid);

/*
 * The snapshot the next node to start reads under, in place of its
 * statement's (InvalidSnapshot: its statement's); that node takes it.
 * cpht_insert_new's INSERTs read the rows its scan saw this way, though
 * SPI gives each statement the command id of its turn.  Returns the value
 * it replaces.
 */
extern Snapshot cpht_rows_by_tid_read_under(Snapshot snapshot);

/* Installs the planner hook and registers the node (from _PG_init). */
extern void cpht_rows_by_tid_init(void);

/*
 * call_node.c: a query that is one call of cpht_insert_new or
 * cpht_fop_relation, explained with the "cpht call" node in place of a
 * bare Result, so that EXPLAIN ANALYZE shows the call's keys.  Installs
 * the ExplainOneQuery hook and registers the node (from _PG_init).
 */
extern void cpht_call_node_init(void);

#endif							/* CPHT_PLAN_H */
