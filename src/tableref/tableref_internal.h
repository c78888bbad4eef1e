/*
 * tableref_internal.h — what tableref.c (the dispatch, and tables in this
 * backend) and worker_private.c (tables in the cpht worker) share.
 */
#ifndef CPHT_ACCESS_INTERNAL_H
#define CPHT_ACCESS_INTERNAL_H

#include "tableref/tableref.h"
#include "shmem/protocol.h"

struct CphtTable
{
	cpht_table *local;			/* in this backend, or NULL */
	/* in the cpht worker: */
	uint64		remote_id;
	uint64		generation;		/* the worker start that holds it */
	int64		memory;			/* bytes its kernels took there, counted
								 * against cpht.max_memory */
	uint64		slot_bytes;		/* its slot memory as of the last reply */
	int32		handle;			/* 0 until registered */
	bool		shared;			/* a shared table's handle (session/shared_handles.c) */
	char		error[CPHT_TEXT_LEN];	/* message of the last failed call */
	cpht_call_times times;
};

struct CphtAccessStream
{
	CphtTable  *table;
	cpht_stream *local;			/* a table in this backend */
	/* a worker table: the batch ran at start, its statuses wait here */
	uint8	   *status[2];
	size_t		cap[2];
	int			ready;			/* buffer of the batch not handed out */
	bool		pending;
	size_t		n;
	uint64		inserted;
};

/* worker_private.c */
extern cpht_status cpht_worker_table_create(const cpht_params *params, bool logging,
											CphtTable *t, char *errbuf, size_t errlen);
extern void cpht_worker_table_destroy(CphtTable *t);
extern bool cpht_worker_table_lost(const CphtTable *t);
extern cpht_status cpht_worker_table_call(CphtTable *t, CphtCall call, const uint64 *keys,
										  size_t n, uint8 *status, uint64 *value);
extern uint64 cpht_worker_table_count(CphtTable *t);
extern cpht_status cpht_worker_table_rebuild(CphtTable *t, uint64 *removed);
extern cpht_status cpht_worker_table_stats(CphtTable *t, cpht_stats *out);
extern cpht_status cpht_worker_table_scan(CphtTable *t, uint64 *position, uint64 *keys,
										  size_t max, CphtScanPiece *piece);
extern uint64 cpht_worker_table_log_position(CphtTable *t);
extern cpht_status cpht_worker_table_rollback_to(CphtTable *t, uint64 position);
extern void cpht_worker_table_truncate_log(CphtTable *t, uint64 position);

#endif							/* CPHT_ACCESS_INTERNAL_H */
