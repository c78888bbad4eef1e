/*
 * api/api.h — the door of api/: the SQL-callable functions (one file per
 * family) are reached by PostgreSQL through the extension's scripts, not
 * by other folders.  The only entry points another file names are
 * declared here, for _PG_init (cpht.c), which hands them to plan/
 * (cpht_plan_set_entry_points): the planner recognises a call of one in a
 * query by the C function behind a pg_proc entry, and never calls it.
 * Everything else of api/ is private to the folder.
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
