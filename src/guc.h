/*
 * guc.h — every cpht.* setting: its C variable (defined in guc.c), the
 * values of cpht.device and cpht.placement, and cpht_guc_define(), which
 * defines them all.
 *
 * Who: a leaf of src/: any src/ file may include it, the worker's too
 * (test/check-layout.sh).  cpht_guc_define() is called once per process
 * that loads cpht, from _PG_init (in the postmaster when cpht is preloaded,
 * else in the backend that loads it), before MarkGUCPrefixReserved.  The
 * variables are read where each setting takes effect, and what reads a
 * setting says when it does.
 *
 * Concurrency: the variables are each process's own, as every setting is:
 * a backend, a parallel worker (which gets its leader's values) and the
 * cpht worker read their copy without a lock, on their main thread; the
 * one read from a kernels' helper thread is cpht_max_memory_kb (memcap.c's
 * memory hook), a plain int.  SET and a reload change them between
 * statements; the worker reloads on SIGHUP in its loop.  The postmaster
 * settings of the worker's shared memory are defined only while preloading
 * (their defaults stand on a plain server), and the shared memory keeps
 * the sizes it was made with (shmem/protocol.h).  A check hook refuses a
 * bad value, and PostgreSQL raises the ERROR; cpht.devices hands its
 * list to the kernels (cpht_gpu_set_devices), which use it only before
 * CUDA starts in the process.
 */
#ifndef CPHT_GUC_H
#define CPHT_GUC_H

/* Values of the cpht.device setting. */
typedef enum CphtDeviceSetting
{
	CPHT_SETTING_AUTO = 0,
	CPHT_SETTING_GPU,
	CPHT_SETTING_CPU
} CphtDeviceSetting;

/* Values of cpht.placement. */
typedef enum CphtPlacement
{
	CPHT_PLACEMENT_BACKEND = 0,
	CPHT_PLACEMENT_WORKER
} CphtPlacement;

/* A session's tables */
extern int	cpht_device_setting;	/* cpht.device */
extern int	cpht_placement_setting; /* cpht.placement */
extern int	cpht_cpu_threads;		/* cpht.cpu_threads */
extern int	cpht_max_memory_kb;		/* cpht.max_memory (superuser) */
extern bool cpht_trace;				/* cpht.trace */
extern bool cpht_fop_agg_relation_scan;	/* cpht.fop_agg_relation_scan */
extern bool cpht_grow;				/* cpht.grow */
extern int	cpht_shards;			/* cpht.shards */

/* Tests only (cpht.inject_device_fault, superuser): every request asks the
 * worker to break its GPU context first, as a sticky fault would. */
extern bool cpht_inject_device_fault;

/* Keys sent to the table per batch (cpht.batch_size). */
extern int	cpht_batch_size;

/* Memory the rows of one cpht_fop_rows batch may take, in kB
 * (cpht.batch_memory). */
extern int	cpht_batch_memory_kb;

/* Durable shared tables: cpht.snapshot_interval (seconds) and
 * cpht.snapshot_wal (MB), reloadable */
extern int	cpht_snapshot_interval;
extern int	cpht_snapshot_wal;
/* Tests only: ms the worker waits before a round after a checkpoint */
extern int	cpht_debug_round_delay;

/* The worker's shared memory: postmaster settings, defined only while
 * preloading (their defaults stand on a plain server) */
extern int	cpht_max_shared_tables;
extern int	cpht_max_shared_tables_per_database;	/* reloadable */
extern int	cpht_transfer_windows;
extern int	cpht_transfer_chunk;

/* cpht.max_shared_memory (MB; -1: derived by the worker, 0: no limit),
 * reloadable (worker/quota.c) */
extern int	cpht_max_shared_memory_mb;

/* Internal: the shared tables a parallel query's leader has open, as
 * "handle:entry:table_id,..." for its parallel workers. */
#define CPHT_LEADER_SETTING "cpht.leader_shared_tables"
extern char *cpht_leader_shared_tables;

/* Defines every setting (from _PG_init, before MarkGUCPrefixReserved). */
extern void cpht_guc_define(void);

extern void _PG_init(void);

#endif							/* CPHT_GUC_H */
