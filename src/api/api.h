/*
 * api/api.h — the door of api/: the SQL-callable functions, one file per
 * family (docs/layout.md lists them).
 *
 * Offers nothing to call.  PostgreSQL reaches the SQL functions through
 * the extension's scripts, not through other folders.  The only entry
 * points another file names are declared here, for _PG_init (cpht.c),
 * which hands their addresses to plan/ (cpht_plan_set_entry_points), so
 * that the planner recognises a call of one in a query by the C function
 * behind its pg_proc entry (and the cpht_table type by its input
 * function); plan/ compares the addresses and never calls them.  The rest
 * of api/ is private to the folder (lifecycle.h, export.h, keys.h,
 * key_file.h).
 *
 * Who: cpht.c alone; no other folder (plan/ sits below api/ and includes
 * nothing of it).
 *
 * Concurrency: the functions run under fmgr on the calling process's own
 * thread: a backend, or also a parallel worker for those the scripts mark
 * PARALLEL SAFE (cpht_array_agg's support functions, the cpht_table
 * type's).  They raise ERROR in PostgreSQL's style.  Their locks are those
 * of the layers below, plus the shared catalog's catalog_lock where they
 * read it themselves (info.c, stat.c, catalog_sync.c, shared.c: shared;
 * shared.c takes it exclusive to free the entry of a lost table), each
 * held for one pass over the entries, never across a request to the
 * worker.
 */
#ifndef CPHT_API_H
#define CPHT_API_H

#include "fmgr.h"

/* cpht_fop_new_relation (fop_relation.c): plan/new_keys_planner.c plans it
 * as its own node over a shared table. */
extern PGDLLEXPORT Datum cpht_fop_new_relation(PG_FUNCTION_ARGS);

/* The input function of the cpht_table type (names.c): plan/ tells the
 * type by it, to take a constant cpht_table for the handle it holds. */
extern PGDLLEXPORT Datum cpht_table_in(PG_FUNCTION_ARGS);
/* cpht_insert_new (insert_new.c) and cpht_fop_relation (fop_relation.c):
 * plan/call_node.c plans a query that is one call of either as its node,
 * for EXPLAIN ANALYZE. */
extern PGDLLEXPORT Datum cpht_insert_new(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum cpht_fop_relation(PG_FUNCTION_ARGS);

#endif							/* CPHT_API_H */
