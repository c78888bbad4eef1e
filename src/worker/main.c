/*
 * main.c — the cpht worker process: signals, its latch loop, its exit.
 *
 * One background worker serves every shared table of the cluster.  It is
 * connected to no database and reads no catalog but the shared
 * pg_database (databases.c): backends check names and privileges, the
 * worker holds tables and runs calls on them.
 * It sleeps on its latch until a backend submits a request
 * (WL_EXIT_ON_PM_DEATH: it never outlives the postmaster); a request's
 * ERROR is answered to that request (dispatch.c) and never ends the
 * process.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "worker/durable.h"
#include "shmem/protocol.h"
#include "worker/worker_internal.h"

/* Set when a sticky device fault ends the worker. */
static char device_lost_reason[CPHT_TEXT_LEN];

static void
worker_at_exit(int code, Datum arg)
{
	(void) arg;
	if (device_lost_reason[0] != '\0')
		cpht_worker_shutdown(device_lost_reason, ERRCODE_SYSTEM_ERROR);
	else
		cpht_worker_shutdown(ShutdownRequestPending ? "the cpht worker stopped" :
							 "the cpht worker exited after an error", ERRCODE_ADMIN_SHUTDOWN);
}

void
cpht_worker_device_lost(const char *reason)
{
	snprintf(device_lost_reason, sizeof(device_lost_reason),
			 "its GPU failed (%s) and the cpht worker restarted", reason);
	ereport(LOG,
			(errmsg("cpht worker exits: the GPU failed"),
			 errdetail("%s", reason),
			 errhint("The postmaster starts a new cpht worker; the tables on the GPU are lost.")));
	/* Exit code 1: the postmaster starts a new worker (see the main loop). */
	proc_exit(1);
}

/*
 * The worker's GPU, probed once here: no other process of a preloaded
 * server initialises CUDA.  A GPU that cannot be used leaves the worker
 * running CPU-only, with the reason for backends that ask for the GPU.
 * The transfer arena is pinned for DMA when the GPU is usable.
 */
static void
probe_gpu(void)
{
	CphtControl *ctl = cpht_control;
	char		reason[CPHT_TEXT_LEN];
	char		name[CPHT_TEXT_LEN];
	char		arena_reason[CPHT_TEXT_LEN];
	uint64		free_bytes = 0,
				total_bytes = 0;
	bool		usable = false;
	bool		registered = false;

	reason[0] = name[0] = arena_reason[0] = '\0';
	if (!cpht_gpu_built())
		strlcpy(reason, "this build of cpht has no GPU support", sizeof(reason));
	else if (cpht_gpu_usable(reason, sizeof(reason)))
	{
		usable = true;
		(void) cpht_gpu_info(name, sizeof(name), &free_bytes, &total_bytes);
		registered = cpht_host_register(cpht_arena, (size_t) ctl->nwindows * ctl->window_keys * (sizeof(uint64) + 1),
										arena_reason, sizeof(arena_reason));
		if (!registered)
			ereport(LOG,
					(errmsg("cpht worker could not pin its transfer arena; calls copy through staging buffers"),
					 errdetail("%s", arena_reason)));
	}
	else
		ereport(LOG,
				(errmsg("cpht worker runs without a GPU"),
				 errdetail("%s", reason)));

	SpinLockAcquire(&ctl->mutex);
	ctl->gpu_state = usable ? CPHT_GPU_USABLE : CPHT_GPU_UNUSABLE;
	strlcpy(ctl->gpu_reason, reason, CPHT_TEXT_LEN);
	strlcpy(ctl->gpu_name, name, CPHT_TEXT_LEN);
	ctl->gpu_free_bytes = free_bytes;
	ctl->gpu_total_bytes = total_bytes;
	ctl->gpu_count = usable ? cpht_gpu_count() : 0;
	ctl->arena_registered = registered;
	strlcpy(ctl->arena_reason, arena_reason, CPHT_TEXT_LEN);
	SpinLockRelease(&ctl->mutex);
}

/*
 * The tables of dropped databases (databases.c): those of databases that no
 * longer exist (sweep: once per start), and those of drops that waited for
 * the restore.  An ERROR is logged and the worker goes on: it must not end
 * the worker, at every start again.
 */
static void
drop_gone_databases(bool sweep)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		if (sweep)
			cpht_worker_drop_orphans();
		cpht_worker_drop_pending();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		LWLockReleaseAll();
	}
	PG_END_TRY();
}

void
cpht_worker_main(Datum arg)
{
	MemoryContext durable_cxt;
	bool		swept = false;

	(void) arg;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	/*
	 * A worker with a database connection gets PostgreSQL's cancel handler
	 * for SIGINT: a cancel (pg_cancel_backend of its pid) would end the
	 * worker with an ERROR at its next interrupt check, and its tables
	 * with it.  Calls are canceled through their backend's slot instead.
	 */
	pqsignal(SIGINT, SIG_IGN);
	BackgroundWorkerUnblockSignals();
	/*
	 * Connected to no database: the worker reads the shared catalog
	 * pg_database to drop the tables of dropped databases
	 * (databases.c), and nothing else.
	 */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	/*
	 * Its row of pg_stat_activity (backend_type "cpht worker", from its
	 * registration) names it as an application too, and shows it idle
	 * until a request comes (dispatch.c reports each one).
	 */
	SetConfigOption("application_name", "cpht worker", PGC_USERSET, PGC_S_SESSION);
	pgstat_report_activity(STATE_IDLE, NULL);

	/*
	 * The worker's kernels stop a call when the calling backend cancels it
	 * and count only private tables' memory, against their backend's cap
	 * (private.c): shared tables are not a session's.
	 */
	cpht_set_interrupt_check(cpht_worker_interrupt);

	cpht_worker_shared_init();
	cpht_worker_serve_init();
	cpht_durable_init();
	cpht_private_init();
	probe_gpu();
	before_shmem_exit(worker_at_exit, (Datum) 0);

	SpinLockAcquire(&cpht_control->mutex);
	cpht_control->worker_pgprocno = MyProc->pgprocno;
	cpht_control->generation++;
	cpht_control->worker_pid = MyProcPid;
	SpinLockRelease(&cpht_control->mutex);

	ereport(LOG, (errmsg("cpht worker started")));
	durable_cxt = AllocSetContextCreate(TopMemoryContext, "cpht durable tables",
										ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		/* Requests submitted before the latch was last reset are served
		 * here; later ones set it again. */
		cpht_worker_serve();
		/* backends that exited set the latch after leaving their slot */
		cpht_private_sweep();
		/* durable tables: restored once recovery ended, then saved in rounds */
		MemoryContextSwitchTo(durable_cxt);
		cpht_durable_poll();
		/*
		 * Once they are back: the tables of databases that are gone, and
		 * of drops that waited for the restore (databases.c)
		 */
		if (pg_atomic_read_u32(&cpht_control->durable_ready) == 1)
		{
			bool		sweep = !swept;

			swept = true;
			drop_gone_databases(sweep);
		}
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(durable_cxt);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 cpht_durable_timeout(), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		if (ShutdownRequestPending)
		{
			/* a clean shutdown saves what changed since the last round */
			MemoryContextSwitchTo(durable_cxt);
			cpht_durable_shutdown();
			MemoryContextSwitchTo(TopMemoryContext);
			break;
		}
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			/* cpht_worker_info() shows the limit op_create enforces */
			SpinLockAcquire(&cpht_control->mutex);
			cpht_control->max_tables_per_database = cpht_tables_per_database_limit();
			SpinLockRelease(&cpht_control->mutex);
		}
	}

	/*
	 * Exit code 1, not 0: the postmaster never starts again a background
	 * worker that exits with 0.  At server shutdown nothing is restarted
	 * anyway; a SIGTERM at any other time (kill -TERM of the worker's pid)
	 * must not leave the cluster without one.
	 */
	proc_exit(1);
}
