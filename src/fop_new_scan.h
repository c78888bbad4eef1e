/*
 * fop_new_scan.h — cpht_fop_new_relation as a parallel plan node over a
 * shared table (fop_new_scan.c).
 */
#ifndef CPHT_FOP_NEW_SCAN_H
#define CPHT_FOP_NEW_SCAN_H

#include "nodes/plannodes.h"

/* Installs the planner hook and registers the node (from _PG_init). */
extern void cpht_new_keys_init(void);

/* Whether funcid is cpht_fop_new_relation, whatever schema holds it. */
extern bool cpht_is_fop_new_relation(Oid funcid);

/* Whether plan is the node. */
extern bool cpht_new_keys_plan(Plan *plan);

#endif							/* CPHT_FOP_NEW_SCAN_H */
