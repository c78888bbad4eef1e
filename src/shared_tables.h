/*
 * shared_tables.h — shared tables by name: SQL functions on handles of
 * shared tables, and what the rest of the backend asks about them.
 */
#ifndef CPHT_SHARED_TABLES_H
#define CPHT_SHARED_TABLES_H

#include "fmgr.h"

#include "client.h"
#include "handles.h"

/* cpht_drop of a shared table's handle: for every session, at once.  The
 * other functions reach shared tables through access.h. */
extern Datum cpht_shared_drop(PG_FUNCTION_ARGS);

/*
 * The shared table of a handle, usable by the current role: ERROR 42704
 * when it was dropped, 58000 when it was lost, 42501 when the role may not
 * use it.  *name and *owner (when not NULL) get its name and owner.
 */
extern CphtSharedRef cpht_shared_ref(int32 handle, char *name, Oid *owner);

/* A batch call on a shared table's handle (cpht_remote_call after the
 * checks of cpht_shared_ref). */
extern uint64 cpht_shared_call(int32 handle, CphtCall call, const uint64 *keys,
							   uint64 n, uint8 *status);

/*
 * The entry of shared handle `handle`, which this session has not
 * registered, looked up in the shared catalog and registered: 42704 when
 * no shared table of this database has that handle (58000 when a cpht
 * worker before the running one gave it), 42501 when the role may not use
 * it; with missing_ok NULL instead of either.
 */
extern CphtHandle *cpht_shared_resolve(int32 handle, bool missing_ok);

/* The entry of a shared handle, registered now if it was not (NULL when it
 * names no shared table the role may use, and in a parallel worker for one
 * the leader did not hand over): for the planner, which must not raise. */
extern CphtHandle *cpht_shared_lookup(int32 handle);

/* This session's handle of a shared table, 0 if it has not opened it. */
extern int32 cpht_shared_handle_of(int32 entry, uint64 table_id);

/* The handles this session opened or created for shared tables (dropped
 * ones included); returns how many. */
extern int	cpht_shared_open_handles(const int32 **handles);

/*
 * A parallel worker's handle for the leader's shared table: the same
 * number the leader's session gave it, naming the catalog entry and table
 * id the leader had.
 */
extern void cpht_shared_adopt(int32 handle, int32 entry, uint64 table_id);

/*
 * Waits (cancelably, up to a minute) until the cpht worker has restored the
 * durable tables after a start or a restart of the worker; returns at once
 * on a standby, which restores nothing.
 */
extern void cpht_shared_wait_restored(void);

#endif							/* CPHT_SHARED_TABLES_H */
