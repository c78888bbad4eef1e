/*
 * tableref_internal.h — the placement routine: what tableref.c (which picks
 * a table's routine and calls through it) and the placements share.
 *
 * A table has one placement for its life, chosen when it is created or
 * opened, and with it one routine (CphtTableRoutine), as a PostgreSQL
 * table access method has its TableAmRoutine.  The placements:
 *
 *   local.c           in this backend: the kernels called directly
 *   worker_private.c  a private table held by the cpht worker: requests on
 *                     this backend's slot
 *   shared_table.c    a shared table (held by the cpht worker): calls
 *                     checked against the shared catalog first
 *
 * call_stream.c is the stream of a table in the worker (both placements
 * there): each batch runs as one call when it is started.
 *
 * Every entry is set in every routine; tableref.c never tests which
 * placement a table has.
 */
#ifndef CPHT_TABLEREF_INTERNAL_H
#define CPHT_TABLEREF_INTERNAL_H

#include "tableref/tableref.h"
#include "shmem/protocol.h"

typedef struct CphtTableRoutine CphtTableRoutine;

struct CphtTableRef
{
	const CphtTableRoutine *ops;	/* its placement */
	cpht_table *local;			/* in this backend (local.c), or NULL */
	/* in the cpht worker (worker_private.c): */
	uint64		remote_id;
	uint64		generation;		/* the worker start that holds it */
	int64		memory;			/* bytes its kernels took there, counted
								 * against cpht.max_memory */
	uint64		slot_bytes;		/* its slot memory as of the last reply */
	int32		handle;			/* 0 until registered */
	/* a shared table (shared_table.c): */
	int32		shared_entry;	/* its catalog index, -1 once dropped here */
	uint64		shared_table_id;
	uint64		shared_generation;	/* the cpht worker's generation when
									 * opened (protocol.h) */
	char		error[CPHT_TEXT_LEN];	/* message of the last failed call */
	cpht_call_times times;
};

struct CphtTableRefStream
{
	CphtTableRef *table;
	cpht_stream *local;			/* a table in this backend */
	/* a table in the worker: the batch ran at start, its statuses wait here */
	uint8	   *status[2];
	size_t		cap[2];
	int			ready;			/* buffer of the batch not handed out */
	bool		pending;
	size_t		n;
	uint64		inserted;
};

/*
 * The operations of one placement; the contract of each is that of the
 * cpht_tableref_* function of the same name (tableref.h).  create fills a
 * zeroed CphtTableRef (its ops already set) and may raise; a shared table is
 * not created here but opened (cpht_tableref_shared), so its create is an
 * internal error.  call runs one batch (CphtCall): a status per key into
 * status, or the number inserted into *value (CPHT_CALL_PUT).
 */
struct CphtTableRoutine
{
	const char *placement;		/* "backend" or "worker" */
	cpht_status (*create) (const cpht_params *params, bool logging, CphtTableRef *t,
						   char *errbuf, size_t errlen);
	void		(*destroy) (CphtTableRef *t);
	bool		(*lost) (const CphtTableRef *t);
	uint64		(*slot_bytes) (CphtTableRef *t, uint64 created_bytes);
	cpht_status (*call) (CphtTableRef *t, CphtCall call, const uint64 *keys, size_t n,
						 uint8 *status, uint64 *value);
	uint64		(*count) (CphtTableRef *t);
	cpht_status (*rebuild) (CphtTableRef *t, uint64 *removed);
	cpht_status (*stats) (CphtTableRef *t, cpht_stats *out);
	cpht_status (*scan) (CphtTableRef *t, uint64 *position, uint64 *keys, size_t max,
						 CphtScanPiece *piece);
	const char *(*error) (const CphtTableRef *t);
	void		(*call_times) (const CphtTableRef *t, cpht_call_times *out);
	/* the undo log (session/txn.c): rollback_to and truncate_log never raise */
	uint64		(*log_position) (CphtTableRef *t);
	cpht_status (*rollback_to) (CphtTableRef *t, uint64 position);
	void		(*truncate_log) (CphtTableRef *t, uint64 position);
	/* streams: open fills s (its table set, the rest zero); false: out of memory */
	bool		(*stream_open) (CphtTableRefStream *s);
	cpht_status (*stream_start) (CphtTableRefStream *s, const uint64 *keys, size_t n);
	cpht_status (*stream_finish) (CphtTableRefStream *s, const uint8 **status, size_t *n,
								  uint64 *inserted);
	void		(*stream_close) (CphtTableRefStream *s);
};

extern const CphtTableRoutine cpht_local_routine;	/* local.c */
extern const CphtTableRoutine cpht_worker_private_routine;	/* worker_private.c */
extern const CphtTableRoutine cpht_shared_routine;	/* shared_table.c */

/* tableref.c: ERROR where a backend of a preloaded server would initialise
 * CUDA (only the cpht worker may) */
extern void cpht_forbid_cuda_here(const char *what);

/* call_stream.c: the stream entries of a table in the worker */
extern bool cpht_call_stream_open(CphtTableRefStream *s);
extern cpht_status cpht_call_stream_start(CphtTableRefStream *s, const uint64 *keys, size_t n);
extern cpht_status cpht_call_stream_finish(CphtTableRefStream *s, const uint8 **status,
										   size_t *n, uint64 *inserted);
extern void cpht_call_stream_close(CphtTableRefStream *s);

#endif							/* CPHT_TABLEREF_INTERNAL_H */
