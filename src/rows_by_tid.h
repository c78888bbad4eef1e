/*
 * rows_by_tid.h — the plan node through which cpht_insert_new reads the
 * new rows of its source in the order it chose (rows_by_tid.c).
 */
#ifndef CPHT_ROWS_BY_TID_H
#define CPHT_ROWS_BY_TID_H

#include "postgres.h"

/*
 * While set to a relation (InvalidOid: never), a scan of that relation
 * planned as  SELECT ... FROM ONLY rel WHERE ctid = ANY ($1)  with no other
 * condition becomes the node: it returns the rows of the tids in $1 in the
 * array's order, where a TID scan would return them in heap order.
 * Returns the value it replaces, for the caller to put back.
 */
extern Oid	cpht_rows_by_tid_plan_for(Oid relid);

/* Installs the planner hook and registers the node (from _PG_init). */
extern void cpht_rows_by_tid_init(void);

#endif							/* CPHT_ROWS_BY_TID_H */
