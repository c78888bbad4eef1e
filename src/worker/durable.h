/*
 * durable.h — durable shared tables: their WAL records (durable_wal.c),
 * their snapshot files (snapshot.c), and saving, restoring and replaying
 * them in the cpht worker (durable.c, durable_rounds.c,
 * durable_restore.c).  docs/worker.md, "Durable tables",
 * gives the design and the argument for its consistency.
 */
#ifndef CPHT_DURABLE_H
#define CPHT_DURABLE_H

#include "access/xlogdefs.h"
#include "access/xlogreader.h"
#include "port/pg_crc32c.h"

#include "cpht_table.h"
#include "shmem/protocol.h"
#include "worker/worker.h"

/* ---- WAL records (durable_wal.c) ---------------------------------------- */

/*
 * cpht's resource manager id.  RM_EXPERIMENTAL_ID is for development; a
 * released version needs an id reserved on the PostgreSQL wiki
 * (CustomWALResourceManagers).  Every record starts with CPHT_WAL_MAGIC, so
 * that records another experimental resource manager wrote are told apart.
 */
#define CPHT_RMGR_ID		RM_EXPERIMENTAL_ID
#define CPHT_WAL_MAGIC		0x54485043	/* "CPHT" */

#define XLOG_CPHT_CREATE	0x00	/* a durable table was created */
#define XLOG_CPHT_DROP		0x10	/* it was dropped */
#define XLOG_CPHT_PUT		0x20	/* keys a call inserted */
#define XLOG_CPHT_ERASE		0x30	/* keys a call deleted */
#define XLOG_CPHT_XID		0x40	/* written by a backend: its (sub)transaction
									 * id is in WAL before the worker's records
									 * that name it */
#define XLOG_CPHT_EXACT		0x50	/* written by a snapshot round: the
									 * listed snapshot files are exact here */
#define XLOG_CPHT_OWNER		0x60	/* a table's owner changed */

/* Keys per PUT or ERASE record (8 MB of keys): a call's keys take as many
 * records as needed, all of the same transaction. */
#define CPHT_WAL_KEYS_PER_RECORD ((uint64) 1 << 20)

typedef struct xl_cpht_create
{
	uint32		magic;
	Oid			dboid;
	Oid			owner;
	NameData	name;
	bool		transactional;
	int64		capacity;
	cpht_params params;
} xl_cpht_create;

/*
 * A CREATE record is followed by the table's memory cap (int32, kB:
 * CphtCatalogEntry.memory_cap_kb); records written before the cap existed
 * end without it, which is no cap (cpht_wal_create_cap).  The cap of a
 * table created inside a transaction block is followed by the creating
 * (sub)transaction's xid (CphtCatalogEntry.create_xid,
 * cpht_wal_create_xid).
 */

typedef struct xl_cpht_drop
{
	uint32		magic;
	XLogRecPtr	table;			/* create_lsn of the table */
} xl_cpht_drop;

typedef struct xl_cpht_owner
{
	uint32		magic;
	Oid			owner;			/* the new owner */
	XLogRecPtr	table;			/* create_lsn of the table */
} xl_cpht_owner;

typedef struct xl_cpht_keys
{
	uint32		magic;
	TransactionId xid;			/* the writing (sub)transaction; invalid
								 * on a table that is not transactional */
	XLogRecPtr	table;			/* create_lsn of the table */
	/* uint64 keys[] follow */
} xl_cpht_keys;

/*
 * The snapshot file of each listed table, the one written at
 * snapshot_lsn, is exact at every position from snapshot_lsn up to until
 * (Invalid: up to this record): no record of the table lies in between.  A copy of the data directory (a base backup, a standby made
 * from one) has such a file but not the WAL from snapshot_lsn on; its
 * worker replays the table from the first such record in its WAL.
 */
typedef struct xl_cpht_exact_table
{
	XLogRecPtr	table;			/* create_lsn of the table */
	XLogRecPtr	snapshot_lsn;	/* its file */
	XLogRecPtr	until;			/* Invalid: this record */
} xl_cpht_exact_table;

typedef struct xl_cpht_exact
{
	uint32		magic;
	uint32		ntables;
	/* xl_cpht_exact_table tables[] follow */
} xl_cpht_exact;

/* cpht_wal_register: worker/worker.h */

/* Records the worker writes; each returns the end of what it wrote. */
extern XLogRecPtr cpht_wal_create(const CphtCatalogEntry *e, const cpht_params *params);
extern XLogRecPtr cpht_wal_drop(XLogRecPtr table);
extern XLogRecPtr cpht_wal_owner(XLogRecPtr table, Oid owner);
extern XLogRecPtr cpht_wal_exact(const xl_cpht_exact_table *tables, uint32 n);
extern XLogRecPtr cpht_wal_keys(uint8 info, XLogRecPtr table, TransactionId xid,
								const uint64 *keys, uint64 n);

/* cpht_wal_mark_xid: worker/worker.h */

/* The record's cpht payload, or NULL when it is not a cpht record. */
extern const char *cpht_wal_payload(XLogReaderState *record, uint8 *info);

/* The memory cap a CREATE record carries after its xl_cpht_create (0: none,
 * or a record written before caps existed). */
extern int32 cpht_wal_create_cap(XLogReaderState *record);

/* The creating (sub)transaction a CREATE record carries after its cap
 * (Invalid: created outside a transaction block, or an older record):
 * the table exists only if it committed. */
extern TransactionId cpht_wal_create_xid(XLogReaderState *record);

/* ---- snapshot files (snapshot.c) ------------------------------------------ */

#define CPHT_SNAPSHOT_DIR "pg_cpht"
/* Version 2 keeps slots in the encoding without a live bit (layout.h);
 * version 1 files, whose slots have one, are read and converted. */
#define CPHT_SNAPSHOT_VERSION 2

/* Open transactions' changes a snapshot keeps: one segment per writing
 * (sub)transaction, entries as the undo list has them. */
typedef struct CphtSnapshotSegment
{
	TransactionId subxid;
	uint64		n;
	uint64	   *keys;
	uint8	   *deleted;		/* 1: the key was deleted, 0: inserted */
} CphtSnapshotSegment;

/* What a snapshot file holds besides the slots (snapshot_open and
 * snapshot_load fill it, malloc'ed arrays). */
typedef struct CphtSnapshot
{
	Oid			dboid;
	NameData	name;
	Oid			owner;
	bool		transactional;
	int32		memory_cap_kb;	/* CphtCatalogEntry's */
	int64		capacity;
	XLogRecPtr	create_lsn;
	XLogRecPtr	snapshot_lsn;
	cpht_image_info image;
	uint64		file_bytes;
	uint64	   *stash;
	uint64		nsegments;
	CphtSnapshotSegment *segments;
} CphtSnapshot;

/* pg_cpht/<dboid>_<create_lsn>.snap; and the file of a table whose
 * creation (by transaction xid) has not committed yet,
 * pg_cpht/<dboid>_<create_lsn>_<xid>.pending, which a copy of the data
 * directory restores if, and only if, that creation committed */
extern void cpht_snapshot_path(char *path, size_t len, Oid dboid, XLogRecPtr create_lsn);
extern void cpht_snapshot_pending_path(char *path, size_t len, Oid dboid, XLogRecPtr create_lsn,
									   TransactionId xid);

/*
 * Writes the snapshot of table t (catalog entry e, index entry) consistent
 * with WAL position lsn: to a temporary file, fsync'ed, then renamed
 * durably over the previous one.  ERROR on failure (the previous file
 * stays).  With pending_xid valid, to its .pending file.
 */
extern void cpht_snapshot_write(int entry, const CphtCatalogEntry *e, cpht_table *t,
								XLogRecPtr lsn, TransactionId pending_xid);

/* A snapshot file being read. */
typedef struct CphtSnapshotFile
{
	FILE	   *f;
	pg_crc32c	crc;			/* of what was read so far */
	uint64		offset;
	XLogRecPtr	snapshot_lsn;	/* from its header */
	uint64		nsegments;
	uint64		nentries;
	uint32		version;		/* the file's format version */
} CphtSnapshotFile;

/*
 * Reading a snapshot file into a new table, in two steps so that the
 * caller can weigh the table's size in between.
 *
 * snapshot_open: opens it and reads its header.  False with the reason in
 *   why when it is not a snapshot, of another format version, or of
 *   another size than its header announces (the file is closed then);
 *   *name_known says whether out->dboid and out->name could be read all
 *   the same.
 * snapshot_load: creates the table out->image describes (its device and
 *   threads as the caller left them there) and streams the slot arrays
 *   into it, a piece at a time, then reads the stash and the open
 *   transactions' changes and checks the checksum.  False with the reason
 *   in why when the table cannot be created or filled (no device, no room
 *   on it: *file_fault false) or the file is torn or corrupt (*file_fault
 *   true); the table is then destroyed.  Closes the file either way.
 * snapshot_close: closes a file opened but not loaded.
 */
extern bool cpht_snapshot_open(const char *path, CphtSnapshotFile *file, CphtSnapshot *out,
							   bool *name_known, char *why, size_t whylen);
extern bool cpht_snapshot_load(CphtSnapshotFile *file, CphtSnapshot *out, cpht_table **table,
							   bool *file_fault, char *why, size_t whylen);
extern void cpht_snapshot_close(CphtSnapshotFile *file);
/* The (sub)transactions whose changes a file keeps (-1: unreadable). */
extern int	cpht_snapshot_kept_xids(const char *path, TransactionId **xids);
extern void cpht_snapshot_free(CphtSnapshot *s);

/* ---- the catalog of durable tables (durable_catalog.c) -------------------- */

/* One durable table in pg_cpht/catalog. */
typedef struct CphtCatalogRecord
{
	Oid			dboid;
	uint32		lost;			/* 1: its file could not be restored at the
								 * last start (it stays in place) */
	NameData	name;
	XLogRecPtr	create_lsn;		/* its identity (and its file's name) */
	XLogRecPtr	file_lsn;		/* the snapshot_lsn of the file this entry
								 * vouches for (Invalid: none known) */
	XLogRecPtr	current_lsn;	/* that file is exact at this WAL position
								 * too: no record of the table lies between
								 * file_lsn and it, so replay starts here */
} CphtCatalogRecord;

/*
 * write: the catalog of n tables, clean when the worker writes it at a
 * clean shutdown, at WAL position at; crash-safely (a temporary file,
 * fsync'ed, renamed).  ERROR on failure (the previous catalog stays).
 * read: false when there is none (why empty) or it cannot be read (why
 * says so); the records are palloc'ed.
 */
extern void cpht_catalog_file_write(const CphtCatalogRecord *recs, int n, bool clean, XLogRecPtr at);
extern bool cpht_catalog_file_read(CphtCatalogRecord **recs, int *n, bool *clean, XLogRecPtr *at,
								   char *why, size_t whylen);

/* cpht_catalog_refuse_binary_upgrade: worker/worker.h */

/* ---- the worker's durable tables (durable*.c) ----------------------------- */

/* At worker start, and in each turn of its loop: restore the durable
 * tables once recovery has ended (a standby restores them when promoted). */
extern void cpht_durable_init(void);
extern void cpht_durable_poll(void);

/* Milliseconds until the next periodic snapshot round (-1: none). */
extern long cpht_durable_timeout(void);

/* Requests: CREATE and DROP of a durable table, a call that changed one
 * (its keys go to WAL; false with rep's status set when the keys could not
 * be read: the caller undoes the call), CHECKPOINT. */
extern void cpht_durable_created(int entry, cpht_table *t, const cpht_params *params);

/* A table created inside a transaction block (entry's create_xid, now
 * cleared): its creation committed, it gets its file. */
extern void cpht_durable_create_committed(int entry);
extern void cpht_durable_dropped(int entry);
/* Before table entry's owner becomes owner: logged (flushed) if durable. */
extern void cpht_durable_owner_changed(int entry, Oid owner);
extern cpht_status cpht_durable_log_call(const CphtRequest *req, cpht_table *t,
										 uint64 position, CphtReply *rep);
extern int	cpht_durable_checkpoint(bool only_changed);

/* A dropped database's snapshot files whose table is not live (it could
 * not be restored): DROP records, files removed; returns how many. */
extern int	cpht_durable_drop_files(Oid dboid);

/* At the worker's clean exit (server shutdown): every changed table. */
extern void cpht_durable_shutdown(void);

/* Settings cpht.snapshot_interval and cpht.snapshot_wal: guc.h */

/*
 * Whether the restore at start runs.  The worker serves requests that need
 * no durable table meanwhile; one that names a durable table is refused.
 */
extern bool cpht_durable_restoring(void);

#endif							/* CPHT_DURABLE_H */
