/*
 * rows_by_tid.h — the plan node through which cpht_insert_new reads the
 * new rows of its source in the order it chose (rows_by_tid.c).
 */
#ifndef CPHT_ROWS_BY_TID_H
#define CPHT_ROWS_BY_TID_H

#include "postgres.h"

#include "utils/snapshot.h"

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

#endif							/* CPHT_ROWS_BY_TID_H */
