/*
 * client.c — a backend's request slot: attaching to it, submitting a
 * request, waiting for the reply, and arena windows.
 *
 * Waiting never calls CHECK_FOR_INTERRUPTS: an ERROR thrown while the
 * worker still works on the request would leave the slot and its window
 * in the worker's hands.  A cancel or terminate request is passed to the
 * worker through the slot's cancel flag instead; the worker stops the call,
 * undoes it and answers CPHT_ERR_CANCELED, and the caller then lets
 * PostgreSQL raise the cancel (errors.c).
 */
#include "postgres.h"

#include <sys/mman.h>

#include "access/xlog.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bitutils.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "client/client.h"

static bool attached = false;
static bool detached = false;	/* the backend is exiting */
static uint64 held_windows = 0;	/* bit w: this backend holds window w */
static uint64 mapped_windows = 0;	/* bit w: part of window w is in this
									 * backend's page tables */
static uint64 mapped_keys[64];	/* keys of window w (and their status bytes)
								 * in this backend's page tables */
static int	stream_worker = -1;	/* pgprocno of the worker a STREAM went to */


static CphtSlot *
my_slot(void)
{
	return &cpht_slots[MyProc->pgprocno];
}

void
cpht_client_require_preload(const char *what)
{
	if (cpht_control == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s requires cpht in shared_preload_libraries", what),
				 errdetail("Shared tables live in the cpht worker, which runs only when the server loads cpht at start."),
				 errhint("Add cpht to shared_preload_libraries and restart the server.")));
}

static void
client_detach(int code, Datum arg)
{
	(void) code;
	(void) arg;
	while (held_windows != 0)
		cpht_client_window_release(pg_rightmost_one_pos64(held_windows));
	my_slot()->pid = 0;
	detached = true;
	/* The worker frees this backend's private tables when it sees the
	 * slot left (worker/private.c). */
	SpinLockAcquire(&cpht_control->mutex);
	if (cpht_control->worker_pid != 0)
		SetLatch(&ProcGlobal->allProcs[cpht_control->worker_pgprocno].procLatch);
	SpinLockRelease(&cpht_control->mutex);
}

bool
cpht_client_can_send(void)
{
	return cpht_control != NULL && !detached && MyProc != NULL;
}

void
cpht_client_attach(void)
{
	CphtSlot   *slot;

	cpht_client_require_preload("a shared cpht table");
	if (attached)
		return;
	if (MyProc == NULL || MyProc->pgprocno < 0 || MyProc->pgprocno >= cpht_control->nslots)
		elog(ERROR, "process has no cpht request slot");
	slot = my_slot();
	/* A predecessor on this PGPROC always read its last reply. */
	if (pg_atomic_read_u32(&slot->state) == CPHT_SLOT_DONE)
		pg_atomic_write_u32(&slot->state, CPHT_SLOT_IDLE);
	slot->pid = MyProcPid;
	before_shmem_exit(client_detach, (Datum) 0);
	attached = true;
}

/* The worker's pgprocno, waiting up to 10 s for one to run (cancelable). */
static int
worker_pgprocno(void)
{
	for (int waited_ms = 0;; waited_ms += 100)
	{
		int			pid,
					procno;

		SpinLockAcquire(&cpht_control->mutex);
		pid = cpht_control->worker_pid;
		procno = cpht_control->worker_pgprocno;
		SpinLockRelease(&cpht_control->mutex);
		if (pid != 0)
			return procno;
		if (waited_ms >= 10000)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the cpht worker is not running"),
					 errdetail("No cpht worker started within 10 seconds."),
					 errhint("See the server log for why it stopped.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

CphtRequest *
cpht_client_request(void)
{
	cpht_client_attach();
	memset(&my_slot()->req, 0, sizeof(CphtRequest));
	my_slot()->req.memory_budget = PG_UINT64_MAX;
	my_slot()->req.inject_device_fault = cpht_inject_device_fault;
	return &my_slot()->req;
}

int
cpht_client_gpu(char *reason, size_t len, uint64 *generation)
{
	int			state;

	cpht_client_require_preload("the cpht worker's GPU");
	(void) worker_pgprocno();
	SpinLockAcquire(&cpht_control->mutex);
	state = cpht_control->gpu_state;
	if (reason)
		strlcpy(reason, cpht_control->gpu_reason, len);
	if (generation)
		*generation = cpht_control->generation;
	SpinLockRelease(&cpht_control->mutex);
	return state;
}

/* The GPUs the worker uses: how many, and the first one's free memory
 * when the worker started (its probe). */
void
cpht_client_gpu_room(int *count, uint64 *free_bytes)
{
	cpht_client_require_preload("the cpht worker's GPU");
	SpinLockAcquire(&cpht_control->mutex);
	*count = cpht_control->gpu_state == CPHT_GPU_USABLE ? cpht_control->gpu_count : 0;
	*free_bytes = cpht_control->gpu_free_bytes;
	SpinLockRelease(&cpht_control->mutex);
}

/* Hands the request to the worker at pgprocno `worker`; never raises. */
static void
submit(int worker)
{
	CphtSlot   *slot = my_slot();
	int			s = MyProc->pgprocno;

	Assert(attached);
	Assert(pg_atomic_read_u32(&slot->state) == CPHT_SLOT_IDLE);
	pg_atomic_write_u32(&slot->cancel, 0);
	pg_write_barrier();
	pg_atomic_write_u32(&slot->state, CPHT_SLOT_SUBMITTED);
	pg_atomic_fetch_or_u64(&cpht_submitted[s / 64], UINT64CONST(1) << (s % 64));
	SetLatch(&ProcGlobal->allProcs[worker].procLatch);
}

/* Passes a cancel or terminate request to the worker, once per request:
 * its kernels read the flag between chunks. */
static void
pass_cancel(void)
{
	if ((QueryCancelPending || ProcDiePending) && pg_atomic_read_u32(&my_slot()->cancel) == 0)
		pg_atomic_write_u32(&my_slot()->cancel, 1);
}

/*
 * A cancel or terminate request that arrived while this backend's request
 * is still waiting for the worker to take it (the worker busy with other
 * requests, stopped, or not serving yet after a restart): the request is
 * withdrawn and PostgreSQL raises the cancel at once; the worker never saw
 * it, so nothing is left to undo.  Where interrupts are held (a
 * transaction's end) nothing is withdrawn.  If PostgreSQL declines to
 * raise (a cancel it ignores), the request is submitted again and the
 * wait goes on.  Returns false when the worker had already taken it.
 */
static bool
withdraw_on_cancel(int worker)
{
	uint32		expected = CPHT_SLOT_SUBMITTED;

	if (!(QueryCancelPending || ProcDiePending) || !INTERRUPTS_CAN_BE_PROCESSED())
		return false;
	if (!pg_atomic_compare_exchange_u32(&my_slot()->state, &expected, CPHT_SLOT_IDLE))
		return false;
	CHECK_FOR_INTERRUPTS();
	submit(worker);
	return true;
}

/* After the reply came: the slot is free for the next request. */
static void
take_reply(void)
{
	pg_read_barrier();
	pg_atomic_write_u32(&my_slot()->state, CPHT_SLOT_IDLE);
}

/* Submits the request to the worker at pgprocno `worker` and waits for its
 * reply.  Raises only a cancel that came before the worker took the request
 * (withdraw_on_cancel withdraws it first, so nothing is left half done);
 * a cancel after that is passed to the worker, and the reply comes. */
static void
submit_and_wait(int worker)
{
	CphtSlot   *slot = my_slot();

	submit(worker);
	while (pg_atomic_read_u32(&slot->state) != CPHT_SLOT_DONE)
	{
		if (withdraw_on_cancel(worker))
			continue;
		pass_cancel();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	take_reply();
}

/* The worker's ERROR in the reply, raised as this backend's own. */
static CphtReply *
raise_worker_error(void)
{
	CphtSlot   *slot = my_slot();

	/*
	 * WAL the worker wrote for this backend's call (a durable table's
	 * changes) counts as the transaction's own: a synchronous commit
	 * flushes up to it.
	 */
	if (slot->rep.wal_end > XactLastRecEnd)
		XactLastRecEnd = slot->rep.wal_end;
	if (slot->rep.sqlerrcode != 0)
		ereport(ERROR,
				(errcode(slot->rep.sqlerrcode),
				 errmsg_internal("%s", slot->rep.message),
				 slot->rep.detail[0] ? errdetail_internal("%s", slot->rep.detail) : 0,
				 slot->rep.hint[0] ? errhint("%s", slot->rep.hint) : 0));
	return &slot->rep;
}

CphtReply *
cpht_client_send(void)
{
	submit_and_wait(worker_pgprocno());
	return raise_worker_error();
}

void
cpht_client_stream_submit(uint64 filled)
{
	CphtSlot   *slot = my_slot();
	int			worker = worker_pgprocno();

	pg_atomic_write_u64(&slot->filled, filled);
	pg_atomic_write_u64(&slot->ran, 0);
	stream_worker = worker;
	submit(worker);
}

void
cpht_client_stream_filled(uint64 pieces)
{
	pg_write_barrier();
	pg_atomic_write_u64(&my_slot()->filled, pieces);
	SetLatch(&ProcGlobal->allProcs[stream_worker].procLatch);
}

bool
cpht_client_stream_wait(uint64 *ran)
{
	CphtSlot   *slot = my_slot();

	for (;;)
	{
		uint64		now = pg_atomic_read_u64(&slot->ran);

		if (now > *ran)
		{
			pg_read_barrier();
			*ran = now;
			return false;
		}
		if (pg_atomic_read_u32(&slot->state) == CPHT_SLOT_DONE)
		{
			take_reply();
			*ran = pg_atomic_read_u64(&slot->ran);
			return true;
		}
		if (withdraw_on_cancel(stream_worker))
			continue;
		pass_cancel();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

CphtReply *
cpht_client_stream_reply(void)
{
	return raise_worker_error();
}

bool
cpht_client_idle(void)
{
	return attached && PostmasterIsAlive() &&
		pg_atomic_read_u32(&my_slot()->state) == CPHT_SLOT_IDLE;
}

CphtReply *
cpht_client_send_quiet(void)
{
	int			pid,
				procno;

	if (!attached)
		return NULL;
	SpinLockAcquire(&cpht_control->mutex);
	pid = cpht_control->worker_pid;
	procno = cpht_control->worker_pgprocno;
	SpinLockRelease(&cpht_control->mutex);
	if (pid == 0)
		return NULL;
	submit_and_wait(procno);
	return &my_slot()->rep;
}

/*
 * The first nkeys keys of window w and their status bytes entered into this
 * backend's page tables at once.  Every backend inherits the arena's
 * mapping, but enters each page into its own page tables at its first
 * touch, a fault per 4 kB page.  One request to the kernel maps a range
 * without a trap per page; where the kernel has no MADV_POPULATE_WRITE
 * (before Linux 5.14) the pages fault as before.  Only the part a call uses
 * is entered, and a backend takes a window it entered before when one is
 * free: a parallel worker is a new process for every statement, and would
 * otherwise enter all four 4M-key windows (37,000 pages) for a few 1M-key
 * batches.  On an H200 host the change was not measurable in a parallel
 * cpht_fop_agg of 30M rows (docs/names.md): there the hand-over's time is
 * mostly the wait for the worker.
 */
void
cpht_client_window_enter(int w, uint64 nkeys)
{
	nkeys = Min(nkeys, cpht_control->window_keys);
	if (nkeys > mapped_keys[w])
	{
#ifdef MADV_POPULATE_WRITE
		Size		page = (Size) sysconf(_SC_PAGESIZE);
		uintptr_t	begin,
					end;

		/* the keys not yet entered, then their status bytes */
		begin = TYPEALIGN_DOWN(page, (uintptr_t) (cpht_window_keys(w) + mapped_keys[w]));
		end = TYPEALIGN(page, (uintptr_t) (cpht_window_keys(w) + nkeys));
		(void) madvise((void *) begin, end - begin, MADV_POPULATE_WRITE);
		begin = TYPEALIGN_DOWN(page, (uintptr_t) (cpht_window_status(w) + mapped_keys[w]));
		end = TYPEALIGN(page, (uintptr_t) (cpht_window_status(w) + nkeys));
		(void) madvise((void *) begin, end - begin, MADV_POPULATE_WRITE);
#endif
		mapped_keys[w] = nkeys;
	}
	mapped_windows |= UINT64CONST(1) << w;
}

/* A free window taken, or -1 when none is free. */
static int
take_free_window(void)
{
	CphtControl *ctl = cpht_control;
	int			w = -1;

	/* a window already in this backend's page tables, where one is free */
	SpinLockAcquire(&ctl->mutex);
	if (ctl->window_free != 0)
	{
		uint64		mine = ctl->window_free & mapped_windows;

		w = pg_rightmost_one_pos64(mine != 0 ? mine : ctl->window_free);
		ctl->window_free &= ~(UINT64CONST(1) << w);
	}
	SpinLockRelease(&ctl->mutex);
	if (w >= 0)
		held_windows |= UINT64CONST(1) << w;
	return w;
}

int
cpht_client_window_acquire(void)
{
	int			w;

	cpht_client_attach();
	while ((w = take_free_window()) < 0)
		ConditionVariableSleep(&cpht_control->window_cv, PG_WAIT_EXTENSION);
	ConditionVariableCancelSleep();
	return w;
}

int
cpht_client_window_try_acquire(void)
{
	cpht_client_attach();
	return take_free_window();
}

void
cpht_client_window_release(int window)
{
	CphtControl *ctl = cpht_control;

	Assert(held_windows & (UINT64CONST(1) << window));
	SpinLockAcquire(&ctl->mutex);
	ctl->window_free |= UINT64CONST(1) << window;
	SpinLockRelease(&ctl->mutex);
	held_windows &= ~(UINT64CONST(1) << window);
	ConditionVariableBroadcast(&ctl->window_cv);
}

/*
 * Right after a start or a worker restart the worker is still restoring
 * durable tables: a name it has not reached yet is missing, or lost from
 * the previous worker.  cpht_open, cpht_tables() and the creation of a
 * durable table wait for the restore (cancelably, at most DURABLE_WAIT_MS)
 * rather than answering that.  A standby restores
 * nothing until it is promoted, so there it does not wait.
 */
#define DURABLE_WAIT_MS 60000

void
cpht_shared_wait_restored(void)
{
	CphtControl *ctl = cpht_control;
	TimestampTz until;

	if (pg_atomic_read_u32(&ctl->durable_ready) == 1 || RecoveryInProgress())
		return;
	until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), DURABLE_WAIT_MS);
	ConditionVariablePrepareToSleep(&ctl->durable_cv);
	while (pg_atomic_read_u32(&ctl->durable_ready) == 0 && GetCurrentTimestamp() < until)
		(void) ConditionVariableTimedSleep(&ctl->durable_cv, 1000, PG_WAIT_EXTENSION);
	ConditionVariableCancelSleep();
}
