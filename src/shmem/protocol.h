/*
 * shmem/protocol.h — the door of shmem/: the shared memory through which
 * backends and the cpht worker talk: the control struct, one request slot
 * per process, the catalog of shared tables and the transfer arena; and
 * cpht_shmem_init, which asks for it and registers the worker (shmem.c).
 *
 * Who: cpht.c and every layer above shmem/ may include it
 * (test/check-layout.sh); shmem/ includes nothing of them.  It exists only
 * with shared_preload_libraries = 'cpht': cpht_shmem_init does nothing
 * otherwise, and the pointers below stay NULL.  The startup hook
 * initialises it once, under AddinShmemInitLock, and every process gets
 * the pointers by fork.
 *
 * Locking.  The control spinlock (mutex) guards the fields marked "under
 * mutex" and the worker_* ones, generation and window_free; it is held for
 * a few instructions and never while taking a lock; the worker may take
 * it inside catalog_lock, never the reverse.  catalog_lock (an LWLock)
 * guards the catalog entries: the worker changes them in exclusive mode;
 * backends read them in shared mode, copying what they use, and drop the
 * lock before using the copy; a backend takes it exclusive only to free
 * the entry of a lost table (api/shared.c).  An entry's count and stats
 * are atomics, read without it (cpht_stat_reset zeroes the stats under
 * the shared lock).  window_cv is broadcast when a window is freed, durable_cv
 * when durable_ready becomes 1.
 *
 * A request's slot takes no lock.  A backend owns the slot of its
 * pgprocno and has at most one request in flight in it; keys and per-key
 * statuses travel in arena windows, never in the slot.  Its life: the
 * backend fills req, sets state SUBMITTED, sets its bit in the submission
 * bitmap and sets the worker's latch; the worker takes the bitmap word,
 * takes the request (SUBMITTED -> RUNNING), serves it, fills rep, sets
 * state DONE and sets the backend's latch; the backend reads rep and sets
 * state IDLE.  Barriers order the payload before each state change.
 */
#ifndef CPHT_PROTOCOL_H
#define CPHT_PROTOCOL_H

#include "access/xlogdefs.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "storage/spin.h"

#include "cpht_table.h"
#include "guc.h"

/* Set in the ids of private tables held by the worker, never in a shared
 * table's. */
#define CPHT_PRIVATE_TABLE_ID_BIT (UINT64CONST(1) << 63)

/*
 * Slot states.  IDLE -> SUBMITTED (the backend), SUBMITTED -> RUNNING (the
 * worker takes it, by compare-and-swap), RUNNING -> DONE (the worker
 * answers), DONE -> IDLE (the backend read the reply).  A backend canceled
 * while its request is still SUBMITTED withdraws it, SUBMITTED -> IDLE by
 * compare-and-swap, so a cancel never waits for a worker that is busy with
 * other requests, stopped or starting: of the two swaps exactly one wins.
 */
#define CPHT_SLOT_IDLE		0
#define CPHT_SLOT_SUBMITTED 1
#define CPHT_SLOT_DONE		2
#define CPHT_SLOT_RUNNING	3

/* Operations a request asks for. */
typedef enum CphtOp
{
	CPHT_OP_CREATE = 1,			/* a shared table by name */
	CPHT_OP_DROP,				/* a shared table, for everyone */
	CPHT_OP_CALL,				/* a whole batch call, keys in one window */
	CPHT_OP_STREAM,				/* a call larger than a window, streamed
								 * through up to CPHT_STREAM_WINDOWS
								 * windows piece by piece
								 * (CphtSlot.filled, .ran) */
	CPHT_OP_COUNT,
	CPHT_OP_STATS,
	CPHT_OP_REBUILD,
	/* private tables: one backend's tables held by the worker (private.c) */
	CPHT_OP_PRIVATE_CREATE,		/* params, logging; replies table_id */
	CPHT_OP_PRIVATE_DROP,
	CPHT_OP_LOG_POSITION,		/* replies the undo log position */
	CPHT_OP_LOG_ROLLBACK_TO,	/* offset: the position */
	CPHT_OP_TRUNCATE_LOG,		/* offset: the position */
	/* transactional shared tables: a transaction's end, sent before it
	 * releases its xid locks (req.top_xid; XACT_ROLLBACK_TO: req.sub_xid
	 * is the aborting subtransaction) */
	CPHT_OP_XACT_COMMIT,
	CPHT_OP_XACT_ABORT,
	CPHT_OP_XACT_ROLLBACK_TO,
	/*
	 * Export: up to nkeys keys of the table's scan from position `offset`
	 * into the window (reply: value keys, and the scan_* fields).  On a
	 * transactional shared table it answers with conflicts while other
	 * transactions have changes on it, so an export sees committed keys.
	 */
	CPHT_OP_SCAN,
	/* durable shared tables (src/worker/durable.c) */
	CPHT_OP_CHECKPOINT,			/* snapshot every changed durable table now;
								 * replies how many were written */
	/*
	 * Every shared table of database req.dboid, which was dropped or whose
	 * cpht extension was dropped (sent once that transaction committed):
	 * dropped, durable ones for good; replies how many (worker/databases.c)
	 */
	CPHT_OP_DROP_DATABASE,
	/* req.entry and req.table_id: its owner becomes req.owner (a durable
	 * table's change goes to WAL) */
	CPHT_OP_ALTER_OWNER,
	/*
	 * req.entry and req.table_id, created inside a transaction block
	 * (CphtCatalogEntry.create_xid): that transaction committed, the table
	 * is everyone's (a durable one's next snapshot no longer names the
	 * creating transaction).  A table rolled back is dropped with DROP.
	 */
	CPHT_OP_CREATE_COMMIT
} CphtOp;

/* The batch operation of CALL and STREAM. */
typedef enum CphtCall
{
	CPHT_CALL_FOP = 1,			/* find-or-put, a status per key */
	CPHT_CALL_FIND,				/* membership, a status per key */
	CPHT_CALL_PUT,				/* insert, the number inserted */
	CPHT_CALL_ERASE				/* delete, a status per key */
} CphtCall;

/* Catalog entry states */
#define CPHT_ENTRY_FREE		0
#define CPHT_ENTRY_CREATING 1	/* name taken, table being created */
#define CPHT_ENTRY_LIVE		2
#define CPHT_ENTRY_LOST		3	/* the worker that held it exited */

#define CPHT_TEXT_LEN 256

/*
 * Windows a streamed call may hold at once: with several, the backend
 * copies pieces ahead while the worker runs earlier ones, so neither waits
 * for the other's hand-over after every piece.
 */
#define CPHT_STREAM_WINDOWS 4

/* Database drops the control struct keeps for a worker that is not there
 * yet (CphtControl.pending_drops). */
#define CPHT_PENDING_DROPS 64

typedef struct CphtRequest
{
	CphtOp		op;
	CphtCall	call;
	int32		entry;			/* catalog index of the table */
	uint64		table_id;		/* must match the entry's */
	int32		window;			/* arena window of the keys/statuses */
	/* STREAM: the windows its pieces take turns in (window is the first) */
	int32		stream_windows[CPHT_STREAM_WINDOWS];
	int32		nstream_windows;
	uint64		offset;			/* LOG ops: a position in the undo log */
	uint64		nkeys;			/* CALL: keys in the window */
	uint64		total;			/* STREAM: keys of the whole call */
	/*
	 * CALL and STREAM from cpht_remote_call: the span of the keys of the
	 * piece in stream_windows[i] (CALL: window, i = 0), taken by the
	 * backend as it copied them in, so the worker's table call need not
	 * read them again for it (cpht_table_expect_span).  A STREAM's later
	 * pieces write theirs before raising `filled` past them.
	 */
	bool		spans_given;
	cpht_key_span piece_span[CPHT_STREAM_WINDOWS];
	/* CREATE */
	cpht_params params;
	int64		capacity;
	NameData	name;
	Oid			dboid;
	Oid			owner;
	/*
	 * A private table (CPHT_OP_PRIVATE_*, and CALL/STREAM/
	 * COUNT/STATS/REBUILD/LOG ops with private_table set): table_id names
	 * it, entry is unused.  CREATE of one: params and logging.
	 */
	bool		private_table;
	bool		logging;
	/* Bytes the kernels may add to the table's undo log and transfer
	 * buffers in this request before it fails with CPHT_ERR_LIMIT
	 * (cpht.max_memory of the backend); UINT64_MAX: no cap. */
	uint64		memory_budget;
	/* Tests only (superuser): the request runs a kernel that breaks the
	 * device's context first, as a sticky fault would. */
	bool		inject_device_fault;
	bool		transactional;	/* CREATE */
	/*
	 * On a transactional table: the caller's top transaction (0 when it
	 * has none: it owns no change) and, for a write, its current
	 * (sub)transaction, which holds its xid lock.
	 */
	TransactionId top_xid;
	TransactionId sub_xid;
	/* CREATE: a durable table (snapshots, WAL) */
	bool		durable;
	/*
	 * CREATE inside a transaction block: the creating (sub)transaction,
	 * which becomes the entry's create_xid; invalid outside one.
	 */
	TransactionId create_xid;
	/*
	 * CREATE of a shared table: the creating session's cpht.max_memory
	 * (kB, 0: none), which becomes the table's memory_cap_kb (below).
	 */
	int32		memory_cap_kb;
} CphtRequest;

/* Owners a write that met other transactions' pending keys reports. */
#define CPHT_MAX_CONFLICTS 4

typedef struct CphtReply
{
	/* An ERROR in the worker: its SQLSTATE (0 when none) and texts. */
	int			sqlerrcode;
	/* A kernel status (cpht_check_status turns it into an ERROR). */
	cpht_status status;
	char		message[CPHT_TEXT_LEN];
	char		detail[CPHT_TEXT_LEN];
	char		hint[CPHT_TEXT_LEN];
	uint64		value;			/* inserted keys, count, tombstones removed */
	int32		entry;			/* CREATE: the new table */
	uint64		table_id;
	cpht_stats	stats;			/* STATS */
	/* Bytes the kernels took (positive) or gave back (negative) for the
	 * request's private table: the backend counts them as its own. */
	int64		memory_delta;
	cpht_call_times times;		/* CALL/STREAM: where the worker's time went */
	double		stream_wait_ms; /* STREAM: the worker waiting for pieces */
	double		stream_run_ms;	/* STREAM: its pieces' table calls */
	/* CALL/STREAM (cpht.trace): the worker's time on the request, from
	 * taking it to answering, and of that, on a transactional table, the
	 * time its transaction's bookkeeping took: checking other
	 * transactions' pending keys, recording the call's changes (and a
	 * durable table's WAL) */
	double		worker_ms;
	double		txn_ms;
	/*
	 * A write on a transactional table that met keys other open
	 * transactions changed: nothing of it ran; wait for these
	 * (sub)transactions and send it again.
	 */
	int			nconflicts;
	TransactionId conflicts[CPHT_MAX_CONFLICTS];	/* of the first changes */
	TransactionId conflict_tops[CPHT_MAX_CONFLICTS];	/* their top xids */
	/* SCAN: the position after the piece, where the scan ends, and the
	 * table's change counter and key count (cpht_table_scan_keys) */
	uint64		scan_position;
	uint64		scan_end;
	uint64		scan_changes;
	uint64		scan_count;
	/* Slot bytes of a private table after the request (0: not one); a
	 * table that grew has more than it was created with. */
	uint64		table_bytes;
	/*
	 * The end of the WAL the worker wrote for the request (a durable
	 * table's changes), 0 when none: the backend's commit flushes up to it.
	 */
	XLogRecPtr	wal_end;
} CphtReply;

/*
 * A STREAM call's pieces: piece p is keys [p * window_keys, ...) of the
 * call and travels in window stream_windows[p % nstream_windows].
 * The backend fills a piece's keys, then raises `filled` past it; the
 * worker runs it on the window in place, leaves its statuses there, then
 * raises `ran` past it.  The backend refills a window only after copying
 * the statuses of the piece it held.  Both are reset by the backend before
 * it submits the request.
 */
typedef struct CphtSlot
{
	pg_atomic_uint32 state;
	pg_atomic_uint32 cancel;	/* set by the waiting backend on a cancel */
	int			pid;			/* backend using the slot, 0 when none */
	CphtRequest req;
	CphtReply	rep;
	pg_atomic_uint64 filled;	/* STREAM: pieces whose keys are in */
	pg_atomic_uint64 ran;		/* STREAM: pieces whose statuses are out */
} CphtSlot;

/*
 * A shared table's statistics (cpht_stat_tables): the worker adds to the
 * counters after each call on the table (fetch-add, so that a reset by
 * cpht_stat_reset, which writes zeros from a backend, loses no call that
 * ends meanwhile beyond the one being counted) and writes the durable
 * fields after each snapshot round; backends read them without a lock.
 * They start at zero when the table is created or restored.
 */
typedef struct CphtTableStats
{
	pg_atomic_uint64 calls;		/* calls that ran to the end */
	pg_atomic_uint64 keys;		/* keys those calls sent */
	pg_atomic_uint64 new_keys;	/* keys they put that were not there */
	pg_atomic_uint64 time_us;	/* the worker's time in calls, every call */
	pg_atomic_uint64 waits;		/* writes that met other transactions'
								 * keys: the caller waited for them */
	pg_atomic_uint64 growths;	/* times the table grew inside a call */
	/* durable tables: the last snapshot's WAL position and time, and
	 * where the WAL kept for the table starts (0: none) */
	pg_atomic_uint64 snapshot_lsn;
	pg_atomic_uint64 snapshot_time; /* TimestampTz */
	pg_atomic_uint64 wal_keep_lsn;
	pg_atomic_uint64 reset_time;	/* TimestampTz: created or last reset */
} CphtTableStats;

static inline void
cpht_table_stats_init(CphtTableStats *st, uint64 now)
{
	pg_atomic_init_u64(&st->calls, 0);
	pg_atomic_init_u64(&st->keys, 0);
	pg_atomic_init_u64(&st->new_keys, 0);
	pg_atomic_init_u64(&st->time_us, 0);
	pg_atomic_init_u64(&st->waits, 0);
	pg_atomic_init_u64(&st->growths, 0);
	pg_atomic_init_u64(&st->snapshot_lsn, 0);
	pg_atomic_init_u64(&st->snapshot_time, 0);
	pg_atomic_init_u64(&st->wal_keep_lsn, 0);
	pg_atomic_init_u64(&st->reset_time, now);
}

typedef struct CphtCatalogEntry
{
	int			state;
	NameData	name;
	Oid			dboid;
	Oid			owner;
	uint64		table_id;		/* never reused while the server runs */
	cpht_kind	kind;
	cpht_device device;
	int			key_bits;
	int64		capacity;
	uint64		bytes;
	pg_atomic_uint64 count;		/* written by the worker after each write */
	char		lost_reason[CPHT_TEXT_LEN];
	bool		transactional;
	/* durable tables: saved in pg_cpht/, changes in WAL (durable.c) */
	bool		durable;
	XLogRecPtr	create_lsn;		/* end of its CREATE record: its identity */
	/*
	 * The cpht.max_memory of the session that created the table (kB, 0:
	 * none): what the shared tables of its owner, with their open
	 * transactions' changes, may hold together when this one grows or is
	 * written (worker/quota.c).  Kept with a durable table's snapshot and
	 * CREATE record.
	 */
	int32		memory_cap_kb;
	/*
	 * A table created inside a transaction block that has not committed
	 * yet: the creating (sub)transaction (client/ddl_xact.c).  Other
	 * sessions do not see the table until that commits (it is cleared by
	 * CREATE_COMMIT; TransactionIdDidCommit covers the moment between the
	 * commit and that request); a rollback drops it.  Invalid otherwise.
	 */
	TransactionId create_xid;
	CphtTableStats stats;		/* cpht_stat_tables */
} CphtCatalogEntry;

typedef struct CphtControl
{
	slock_t		mutex;			/* worker_* fields and window_free */
	int			worker_pid;		/* 0 while no worker runs */
	int			worker_pgprocno;
	uint64		generation;		/* worker starts since the server started */
	uint64		next_table_id;	/* only the worker touches it */
	/* The first table id the running worker gave (under catalog_lock): a
	 * smaller one is of a worker before it. */
	uint64		first_table_id;
	/* Private tables in the worker count their ids here (under mutex),
	 * apart from shared tables' (CPHT_PRIVATE_TABLE_ID_BIT). */
	uint64		next_private_id;
	LWLock	   *catalog_lock;
	ConditionVariable window_cv;	/* a window was freed */
	/*
	 * Whether the running worker has restored the durable tables (1) or
	 * not yet (0: starting, waiting for recovery to end, restoring, or no
	 * worker); durable_cv is broadcast when it becomes 1.
	 */
	pg_atomic_uint32 durable_ready;
	ConditionVariable durable_cv;
	int			nslots;
	int			max_tables;
	/* the shared tables one database may hold, as the worker enforces it
	 * (cpht.max_shared_tables_per_database; under mutex) */
	int			max_tables_per_database;
	int			nwindows;		/* at most 64 */
	uint64		window_keys;
	uint64		window_free;	/* bit w set: window w is free */
	/*
	 * The worker's GPU, probed once when it starts (under mutex).  Backends
	 * of a preloaded server never probe it themselves.
	 */
	int			gpu_state;		/* CPHT_GPU_* */
	char		gpu_reason[CPHT_TEXT_LEN];	/* why not usable */
	char		gpu_name[CPHT_TEXT_LEN];
	uint64		gpu_total_bytes;
	uint64		gpu_free_bytes; /* at the worker's start */
	int			gpu_count;		/* GPUs it uses (cpht.devices) */
	bool		arena_registered;	/* the arena is pinned for DMA */
	char		arena_reason[CPHT_TEXT_LEN];	/* why not, if not */
	/* Private tables the worker holds, for cpht_worker_info (under mutex). */
	int			private_tables;
	uint64		private_bytes;
	/* Why the previous worker exited, for the tables it lost. */
	char		exit_reason[CPHT_TEXT_LEN];
	/*
	 * Databases whose shared tables are to be dropped (DROP DATABASE, DROP
	 * EXTENSION cpht) that no worker has dropped yet: a drop committed
	 * while no worker ran, or served before the worker restored the
	 * durable tables.  The worker drops them once it has (under mutex).
	 */
	int			npending_drops;
	Oid			pending_drops[CPHT_PENDING_DROPS];
} CphtControl;

/* gpu_state */
#define CPHT_GPU_UNKNOWN	0	/* no worker probed it yet */
#define CPHT_GPU_USABLE		1
#define CPHT_GPU_UNUSABLE	2

/* Set by the shared memory startup hook in every process (inherited by
 * fork), NULL when cpht was not preloaded. */
extern CphtControl *cpht_control;
extern CphtCatalogEntry *cpht_catalog;
extern CphtSlot *cpht_slots;
extern pg_atomic_uint64 *cpht_submitted;	/* bitmap: slot s is bit s % 64 of
											 * word s / 64 */
extern char *cpht_arena;

/* Whether _PG_init ran in the postmaster (shared_preload_libraries). */
extern bool cpht_preloaded;

/* Postmaster settings: guc.h */

/* The shared tables one database may hold under the settings now. */
extern int	cpht_tables_per_database_limit(void);

/* From _PG_init: while preloading, the shared memory hooks and the
 * worker's registration (the settings are guc.c's); else nothing. */
extern void cpht_shmem_init(void);

/* The keys and the statuses of arena window w. */
static inline uint64 *
cpht_window_keys(int w)
{
	return (uint64 *) (cpht_arena + (Size) w * cpht_control->window_keys * (sizeof(uint64) + 1));
}

static inline uint8 *
cpht_window_status(int w)
{
	return (uint8 *) (cpht_window_keys(w) + cpht_control->window_keys);
}

#endif							/* CPHT_PROTOCOL_H */
