/*
 * worker/durable_internal.h — the state the files of durable tables in
 * the cpht worker share: durable.c (which defines it), durable_rounds.c,
 * durable_slot.c, durable_requests.c, durable_restore.c,
 * durable_install.c, durable_replay.c,
 * durable_standby.c, durable_hold.c and durable_wal_keep.c (the last runs
 * in the startup process too, and uses none of the state).  Nothing else includes it; the rest of the worker
 * uses durable.h.  Only the worker process touches this state, one request
 * or round at a time: it needs no lock.
 */
#ifndef CPHT_DURABLE_INTERNAL_H
#define CPHT_DURABLE_INTERNAL_H

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"

#include "worker/durable.h"

/* The replication slot that keeps the WAL of durable tables. */
#define SLOT_NAME "cpht_durable"

typedef struct DurableState
{
	bool		live;			/* a durable table lives at this index */
	/*
	 * Created inside a transaction block, with no snapshot file yet: it
	 * gets its first file once its creation committed (the catalog entry's
	 * create_xid cleared); until then no round writes it and the catalog
	 * file does not name it, and its retention point (current_lsn) stays
	 * at its CREATE record, so that replay after a crash finds the record
	 * and creates the table if, and only if, the creation committed.
	 */
	bool		pending;
	/*
	 * While pending: its .pending file was written, under this xid
	 * (Invalid: none).  A round writes one while the creation is open, so
	 * that a base backup, whose WAL begins after the CREATE record, still
	 * has the table if the creation commits (durable_restore.c).
	 */
	TransactionId pending_xid;
	XLogRecPtr	snapshot_lsn;	/* its last snapshot */
	XLogRecPtr	current_lsn;	/* its file is exact here too: no record of
								 * it since snapshot_lsn (replay and the
								 * slot start here) */
	bool		changed;		/* since then */
	XLogRecPtr	first_change;	/* when changed: at or before the start of
								 * its first record since current_lsn */
	XLogRecPtr	prior_snapshot; /* the file a round just replaced, exact */
	XLogRecPtr	prior_until;	/* up to here (Invalid: none to tell) */
	bool		awaiting;		/* at restore: the WAL from current_lsn on
								 * is not in pg_wal (a copy of the data
								 * directory); replay starts at the first
								 * EXACT record naming its file */
	/* (sub)transactions whose changes its file keeps, to be resolved by a
	 * new snapshot once they ended (TopMemoryContext) */
	int			nsaved;
	TransactionId *saved;
	/* the oldest xid of its records since current_lsn (Invalid: none) */
	TransactionId oldest_xid;
	/*
	 * A standby's replay (durable_standby.c) and the replay at its
	 * promotion: the table holds every record of it before replayed_lsn
	 * whose transaction committed, and no other (Invalid: current_lsn
	 * says); stopped while this replay met a record of it whose
	 * transaction has not ended yet (at replayed_lsn): its later records
	 * wait for the next round.
	 */
	XLogRecPtr	replayed_lsn;
	bool		stopped;
	TransactionId stop_xid;		/* when stopped: the transaction it waits for */
} DurableState;

extern DurableState *durable;	/* by catalog index */
extern bool restored;			/* the tables of pg_cpht are back */
extern bool restoring;			/* a restore or a standby's replay runs */
/* the restore or replay runs on a standby: no transaction is waited for */
extern bool standby_replay;

/* The outcome of a (sub)transaction, as a restore needs it. */
typedef enum XidOutcome
{
	XID_COMMITTED,
	XID_ABORTED,
	XID_UNKNOWN,				/* older than what pg_xact keeps */
	XID_OPEN					/* standby_replay: not ended yet (or not
								 * replayed yet) */
} XidOutcome;

/*
 * Snapshot files that could not be restored: their CREATE records must not
 * bring the table back empty, nor their records apply.  For a sound file
 * whose table did not fit (no device, no room, cpht.max_memory) the WAL
 * from its snapshot on is kept (keep_lsn), so that a later start, with
 * room again, can replay it.
 */
typedef struct FailedFile
{
	Oid			dboid;
	bool		named;			/* name is known */
	NameData	name;
	XLogRecPtr	create_lsn;
	XLogRecPtr	keep_lsn;		/* Invalid: nothing to keep */
	XLogRecPtr	file_lsn;		/* the catalog's, kept for its next version */
} FailedFile;

extern FailedFile *failed;
extern int	nfailed;

/* durable.c: the failed file of a table created at create_lsn, or -1;
 * adding one (or updating it); forgetting what durable[entry] knew; the
 * live durable table created at create_lsn, or -1. */
extern int	durable_failed_index(XLogRecPtr create_lsn);
extern void durable_add_failed(Oid dboid, const char *name, XLogRecPtr create_lsn,
							   XLogRecPtr keep_lsn, XLogRecPtr file_lsn);
extern void durable_forget(int entry);
/* durable.c: the file of a table a replay dropped goes once a catalog
 * that no longer names it is on disk (durable_catalog_written, called by
 * the catalog's writer), as a drop on the primary does. */
extern void durable_unlink_after_catalog(const char *path);
extern void durable_catalog_written(void);
extern int	durable_entry(XLogRecPtr create_lsn);

/* durable_slot.c: the slot's restart_lsn (Invalid: no slot); whether it
 * exists as far as the worker knows (*problem: why not); making it if
 * missing; dropping it; moving it forward to lsn (made again if it was
 * dropped by hand); flushing every WAL record inserted up to insert. */
extern XLogRecPtr durable_slot_restart_lsn(void);
extern bool durable_slot_ready(const char **problem);
extern void durable_ensure_slot(void);
extern void durable_drop_slot(void);
extern void durable_advance_slot(XLogRecPtr lsn);
extern void durable_flush_inserted(XLogRecPtr insert);

/* durable_rounds.c: the periodic rounds count from now; a round if one is
 * due; whether some durable table (or a file that did not fit) needs WAL;
 * pg_cpht/catalog written again (a LOG on failure); table i's snapshot
 * written at lsn. */
extern void durable_rounds_start(void);
extern void durable_round_if_due(void);
extern bool durable_wal_needed(void);
extern void durable_write_catalog_or_log(void);
extern void durable_snapshot_written(int i, XLogRecPtr lsn);

/* durable_requests.c: the first file of a table whose creation committed
 * (pending until then); the .pending file of one whose creation is still
 * open, at a round's position lsn. */
extern void durable_write_first_snapshot(int entry);
extern void durable_write_pending_file(int entry, XLogRecPtr lsn);

/* durable_hold.c: checkpoints wait for the worker (raised, or held on);
 * a checkpoint waiting now goes on (its round has run); none waits. */
extern void durable_hold_checkpoints(void);
extern void durable_hold_let_go(void);
extern void durable_hold_stop(void);

/* durable_wal_keep.c: at the end of recovery (startup process), keeps
 * the WAL segments of pg_wal in pg_cpht/wal/ when no slot keeps them; the
 * restore's segment_open (pg_wal, then those), the oldest segment either
 * has, and removing them once every file is current. */
struct XLogReaderState;
extern void cpht_wal_keep_at_end_of_recovery(void);
extern void cpht_kept_wal_segment_open(struct XLogReaderState *state, XLogSegNo segno,
									   TimeLineID *tli);
extern XLogRecPtr cpht_kept_wal_oldest(void);
extern void cpht_kept_wal_remove(void);

/* durable_install.c: a transaction's outcome (waits while it runs, unless
 * standby_replay); a table that could not be restored remembered under
 * its name; a restored table put into the catalog (-1 and a WARNING when
 * its name is taken or no entry is free); keys applied to a table being
 * restored (false and a WARNING on failure). */
extern XidOutcome durable_xid_outcome(TransactionId xid);
extern void durable_mark_failed(Oid dboid, const char *name, XLogRecPtr create_lsn,
								XLogRecPtr keep_lsn, const char *reason);
extern int	durable_install(cpht_table *t, Oid dboid, const NameData *name, Oid owner,
							int32 memory_cap_kb, bool transactional, int64 capacity,
							XLogRecPtr create_lsn, XLogRecPtr snapshot_lsn,
							XLogRecPtr current_lsn);
extern bool durable_apply_keys(cpht_table *t, const char *name, bool erase,
							   const uint64 *keys, uint64 n);

/* durable_replay.c: the records from start on (EXACT records only when
 * scan_from is valid); returns the position read up to. */
extern XLogRecPtr durable_replay(XLogRecPtr start, XLogRecPtr scan_from);

/* durable_restore.c: restores every table of pg_cpht, then replays WAL,
 * once per worker start, with restoring set: after recovery ended, or on
 * a standby (on_standby: no transaction waited for; a table stops at its
 * first record of a transaction still open there).  Returns the position
 * replayed to (Invalid: nothing was read). */
extern XLogRecPtr durable_restore_all(bool on_standby);

/* durable_replay.c: the records from "from" on into the tables held (a
 * standby's later rounds, and its promotion), returning the position
 * read up to; where a standby's next replay starts, after one that read
 * up to "reached": there, unless a transaction that stopped a table (or
 * a CREATE) has ended since, or "all" (the promotion), which replays
 * from that table's stop; the first CREATE left for later (Invalid:
 * none). */
extern XLogRecPtr durable_replay_from(XLogRecPtr from, bool on_standby);
extern XLogRecPtr durable_replay_next_start(XLogRecPtr reached, bool all);
/* durable_replay.c: whether the last replay could not read the WAL it
 * needed (its tables were lost, with a WARNING). */
extern bool durable_replay_failed(void);
extern XLogRecPtr durable_replay_create_stop(void);

/* durable_rounds.c, on a standby: the slot exists (false: none can be
 * made); a round writing the files of the tables at "at"; the last
 * round's time and position. */
extern bool durable_standby_keep_wal(void);
extern int	durable_standby_round(XLogRecPtr at);
extern void durable_last_round(TimestampTz *when, XLogRecPtr *lsn);

/* durable_standby.c: the worker of a hot standby keeps the files of the
 * durable tables rolling forward along replay.  poll: the restore once
 * the files allow it, then rounds when due; roll: a round now
 * (cpht_checkpoint() there); active: the tables are held (the restore
 * ran); promoted: the records since the last round, once recovery ended. */
extern void durable_standby_poll(void);
extern int	durable_standby_roll(void);
extern bool durable_standby_active(void);
extern void durable_standby_promoted(void);

#endif							/* CPHT_DURABLE_INTERNAL_H */
