/*
 * main.c — the cpht worker process: signals, its latch loop, its exit.
 *
 * One background worker serves every shared table of the cluster.  It has
 * no database connection and never touches the catalogs: backends check
 * names and privileges, the worker holds tables and runs calls on them.
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
#include "storage/proc.h"
#include "utils/guc.h"

#include "protocol.h"
#include "worker.h"

static void
worker_at_exit(int code, Datum arg)
{
	(void) arg;
	cpht_worker_shutdown(ShutdownRequestPending ? "the cpht worker stopped" :
						 "the cpht worker exited after an error");
}

void
cpht_worker_main(Datum arg)
{
	(void) arg;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	/*
	 * The worker's kernels stop a call when the calling backend cancels it,
	 * and count no session's memory: shared tables are not a session's.
	 */
	cpht_set_interrupt_check(cpht_worker_interrupt);
	cpht_set_memory_hook(NULL);

	cpht_worker_tables_init();
	before_shmem_exit(worker_at_exit, (Datum) 0);

	SpinLockAcquire(&cpht_control->mutex);
	cpht_control->worker_pgprocno = MyProc->pgprocno;
	cpht_control->generation++;
	cpht_control->worker_pid = MyProcPid;
	SpinLockRelease(&cpht_control->mutex);

	ereport(LOG, (errmsg("cpht worker started")));

	for (;;)
	{
		/* Requests submitted before the latch was last reset are served
		 * here; later ones set it again. */
		cpht_worker_serve();

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		if (ShutdownRequestPending)
			break;
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
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
