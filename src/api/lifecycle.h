/*
 * lifecycle.h — what cpht_create() decides, for the shared tables too.
 */
#ifndef CPHT_LIFECYCLE_H
#define CPHT_LIFECYCLE_H

#include "fmgr.h"

#include "cpht_table.h"

/* A table kind's SQL name ("iceberg", "cuckoo"), as cpht_create takes it. */
extern const char *cpht_kind_name(cpht_kind kind);

/* Checks cpht_create()'s arguments and sizes the table (ERROR when out of
 * range); returns its bytes of slot memory.  Device and seed are left to
 * the caller. */
extern uint64 cpht_create_params(int64 capacity, const char *kind_name,
								 int32 key_bits, int32 shards,
								 cpht_params *params);

/* cpht_create's shards argument (its sixth), or where the call gives none
 * (NULL, or no such argument) cpht.shards; a durable table's default is 1. */
extern int32 cpht_create_shards_arg(FunctionCallInfo fcinfo, bool durable);

/* The shards and bytes of a GPU table too large for one GPU (lifecycle.c). */
extern uint64 cpht_create_fit_gpus(FunctionCallInfo fcinfo, bool durable,
								   cpht_params *params, uint64 bytes,
								   const char *what);

/* The device cpht.device picks for a new table in this backend. */
extern cpht_device cpht_choose_device(void);

/* A fresh hash seed per table. */
extern uint64 cpht_new_seed(void);

/* cpht_create of 0.1: private tables (lifecycle.c). */
extern Datum cpht_create(PG_FUNCTION_ARGS);

/* The owner of the shared tables this session creates from now on
 * (InvalidOid: the current role), for a restore's rows (shared.c). */
extern void cpht_shared_create_as(Oid owner);

/* Whether this session sees a live shared table of that name (shared.c). */
extern bool cpht_shared_exists(const char *name);

/* What cpht_open(name) does (shared.c): this session's handle of shared
 * table name, registered; the errors of cpht_open, what naming the caller
 * for 55000 when cpht was not preloaded.  For the cpht_table type too
 * (names.c). */
extern int32 cpht_open_name(const char *name, const char *what);

/* cpht_drop of a shared table's handle: for every session, at once
 * (shared.c). */
extern Datum cpht_shared_drop(PG_FUNCTION_ARGS);

#endif							/* CPHT_LIFECYCLE_H */
