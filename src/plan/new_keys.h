/*
 * new_keys.h — cpht_fop_new_relation as a parallel plan node, "cpht new
 * keys": what its planning (new_keys_planner.c) and its execution
 * (new_keys_exec.c) share.
 *
 *   SELECT count(*) FROM cpht_fop_new_relation(h, 'staging');
 *
 * As a set-returning function, cpht_fop_new_relation reads the relation in
 * parallel (stream/heap_feed.c) but returns its new keys through one backend: the
 * function scan stores every row in a tuplestore and reads it back, and
 * whatever the query does with the rows runs in that backend too.  Over a
 * shared table, which parallel workers reach (hooks.c), the
 * planner hook (new_keys_planner.c) offers, in place of the function scan, a
 * parallel-aware scan node, "cpht new keys": every participant of a
 * Gather (the workers and the leader) takes pages of the relation from
 * one parallel heap scan, sends their keys to the table in batches of its
 * own stream, and returns the keys the table reported new as its rows.  Aggregates above it run
 * partially in the workers, so a count of the new keys moves no row
 * between processes.  The table sees the same keys as from the function,
 * once each, and answers each new key to exactly one participant.
 *
 * When.  The hook adds the node only where nothing can ask it to return
 * its rows twice (find-or-put answers "new" once): the function is the
 * only relation of a top-level query (no join to rescan it, no subquery
 * or CTE around it), called with constants or parameters the plan is made
 * for, on a shared table this session has open, over a relation that the
 * parallel scan reads as a query would (cpht_relscan_reads_all) with at
 * least one worker to give it.  The planner then weighs the node under a
 * Gather against the function scan (see the costs in new_keys_planner.c).
 * cpht_fop_new_relation is PARALLEL RESTRICTED for this: a function scan
 * of it still runs only in the leader.  A plan made for a role that the
 * relation's policies do not bind is made again for another role
 * (dependsOnRole, as row-level security needs); a change to the relation
 * invalidates it (relationOids).
 *
 * Every key.  The function puts every key of the relation whatever its
 * caller reads; so does the node: when it ends before its scan is done
 * (a LIMIT above it), it sends the rest of its pages' keys without
 * returning them.
 *
 * If the relation no longer qualifies when the plan runs, the leader reads
 * it through the query route of stream/query_feed.c and returns the new keys from a
 * tuplestore, as the function would; the workers return nothing.  A
 * leader that reads no rows of the plan (parallel_leader_participation
 * off) cannot do that: such a run fails before it puts any key.
 *
 * The plan is a CustomScan whose custom_exprs are the call's three
 * arguments (handle, relation, key column), evaluated when it starts, and
 * whose scan tuple is the function's one bigint column; custom_private is
 * empty.
 */
#ifndef CPHT_NEW_KEYS_H
#define CPHT_NEW_KEYS_H

#include "nodes/extensible.h"

#define CPHT_NEW_KEYS_NODE_NAME "cpht new keys"

/* new_keys_exec.c: the plan's methods, which create its executor state */
extern CustomScanMethods cpht_new_keys_scan_methods;

/* new_keys_exec.c: fills and registers the plan's and the executor's
 * methods (from cpht_new_keys_init) */
extern void cpht_new_keys_exec_init(void);

#endif							/* CPHT_NEW_KEYS_H */
