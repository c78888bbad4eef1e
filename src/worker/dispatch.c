/*
 * dispatch.c — the cpht worker's serve loop: taking submitted requests,
 * routing each to what serves it (registry.c for the tables, calls.c for
 * calls, private.c, xacts.c, durable tables, databases.c), and answering.
 *
 * Requests are served one at a time, by the worker's only PostgreSQL
 * thread; the kernels use their own helper threads inside a call.  Each
 * request runs under its own error handler and memory context: an ERROR
 * (an unknown table, a taken name) becomes the reply, with its SQLSTATE,
 * and the worker goes on with the next request.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bitutils.h"
#include "portability/instr_time.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "cpht_table.h"
#include "shmem/protocol.h"
#include "worker/worker_internal.h"
#include "worker/durable.h"
#include "worker/xacts.h"

static int	serving = -1;		/* slot of the request being served */
static MemoryContext request_cxt = NULL;

void
cpht_worker_serve_init(void)
{
	request_cxt = AllocSetContextCreate(TopMemoryContext, "cpht worker request",
										ALLOCSET_DEFAULT_SIZES);
}

int
cpht_worker_serving(void)
{
	return serving;
}

static void
handle_request(CphtSlot *slot, int s)
{
	const CphtRequest *req = &slot->req;
	CphtReply  *rep = &slot->rep;
	cpht_table *t;

	switch (req->op)
	{
		case CPHT_OP_CREATE:
			cpht_worker_op_create(slot);
			break;
		case CPHT_OP_DROP:
			cpht_worker_op_drop(slot);
			break;
		case CPHT_OP_CALL:
			cpht_worker_op_call(slot, s);
			break;
		case CPHT_OP_STREAM:
			cpht_worker_op_stream(slot, s);
			break;
		case CPHT_OP_COUNT:
			rep->value = cpht_xacts_count(req, cpht_table_count(cpht_worker_request_table(req)));
			break;
		case CPHT_OP_STATS:
			t = cpht_worker_request_table(req);
			cpht_worker_reply_status(rep, cpht_table_stats(t, &rep->stats), cpht_table_error(t));
			break;
		case CPHT_OP_REBUILD:
			cpht_worker_op_rebuild(slot);
			break;
		case CPHT_OP_SCAN:
			cpht_worker_op_scan(slot);
			break;
		case CPHT_OP_CHECKPOINT:
			rep->value = (uint64) cpht_durable_checkpoint(true);
			break;
		case CPHT_OP_DROP_DATABASE:
			cpht_worker_op_drop_database(slot);
			break;
		case CPHT_OP_ALTER_OWNER:
			cpht_worker_op_alter_owner(slot);
			break;
		case CPHT_OP_CREATE_COMMIT:
			cpht_worker_op_create_commit(slot);
			break;
		case CPHT_OP_XACT_COMMIT:
		case CPHT_OP_XACT_ABORT:
		case CPHT_OP_XACT_ROLLBACK_TO:
			cpht_xacts_end(req);
			break;
		default:
			if (!cpht_private_request(slot, s))
				elog(ERROR, "unknown cpht request %d", (int) req->op);
	}
}

/* What a request asks, as pg_stat_activity shows it in the worker's row. */
static const char *
op_name(const CphtRequest *req)
{
	switch (req->op)
	{
		case CPHT_OP_CREATE:
			return "create";
		case CPHT_OP_DROP:
			return "drop";
		case CPHT_OP_CALL:
		case CPHT_OP_STREAM:
			switch (req->call)
			{
				case CPHT_CALL_FOP:
					return "find-or-put";
				case CPHT_CALL_FIND:
					return "find";
				case CPHT_CALL_PUT:
					return "put";
				case CPHT_CALL_ERASE:
					return "delete";
			}
			return "call";
		case CPHT_OP_COUNT:
			return "count";
		case CPHT_OP_STATS:
			return "statistics";
		case CPHT_OP_REBUILD:
			return "rebuild";
		case CPHT_OP_SCAN:
			return "export";
		case CPHT_OP_CHECKPOINT:
			return "checkpoint";
		case CPHT_OP_DROP_DATABASE:
			return "drop the tables of a database";
		case CPHT_OP_ALTER_OWNER:
			return "alter owner";
		case CPHT_OP_XACT_COMMIT:
			return "transaction commit";
		case CPHT_OP_XACT_ABORT:
		case CPHT_OP_XACT_ROLLBACK_TO:
			return "transaction abort";
		default:
			return "private table request";
	}
}

/*
 * The worker's row of pg_stat_activity: state active, and as its query
 * the request it serves, for whom and on which table, e.g.
 *     cpht: find-or-put of 1000000 keys on shared table "seen" for process 4242
 */
static void
report_request(const CphtSlot *slot)
{
	const CphtRequest *req = &slot->req;
	char		activity[2 * NAMEDATALEN + 128];
	char		what[NAMEDATALEN + 32];
	uint64		keys = req->op == CPHT_OP_STREAM ? req->total : req->nkeys;

	what[0] = '\0';
	if (req->op == CPHT_OP_CREATE)
		snprintf(what, sizeof(what), " of shared table \"%s\"", NameStr(req->name));
	else if (req->private_table)
		snprintf(what, sizeof(what), " on a private table");
	else if (req->entry >= 0 && req->entry < cpht_control->max_tables &&
			 (req->op == CPHT_OP_CALL || req->op == CPHT_OP_STREAM || req->op == CPHT_OP_DROP ||
			  req->op == CPHT_OP_COUNT || req->op == CPHT_OP_STATS || req->op == CPHT_OP_REBUILD ||
			  req->op == CPHT_OP_SCAN || req->op == CPHT_OP_ALTER_OWNER))
		/* the worker alone writes names: no lock to read one */
		snprintf(what, sizeof(what), " on shared table \"%s\"", NameStr(cpht_catalog[req->entry].name));
	if (req->op == CPHT_OP_CALL || req->op == CPHT_OP_STREAM)
		snprintf(activity, sizeof(activity), "cpht: %s of " UINT64_FORMAT " keys%s for process %d",
				 op_name(req), keys, what, slot->pid);
	else
		snprintf(activity, sizeof(activity), "cpht: %s%s for process %d",
				 op_name(req), what, slot->pid);
	pgstat_report_activity(STATE_RUNNING, activity);
}

static void
reply(int s)
{
	pg_write_barrier();
	pg_atomic_write_u32(&cpht_slots[s].state, CPHT_SLOT_DONE);
	SetLatch(&ProcGlobal->allProcs[s].procLatch);
}

static void
serve_one(int s)
{
	CphtSlot   *slot = &cpht_slots[s];
	MemoryContext old;
	instr_time	start,
				end;

	INSTR_TIME_SET_CURRENT(start);
	pg_read_barrier();
	memset(&slot->rep, 0, sizeof(CphtReply));
	old = MemoryContextSwitchTo(request_cxt);
	serving = s;
	report_request(slot);
	cpht_private_request_begin(&slot->req);
	PG_TRY();
	{
		/* tests only: a sticky fault, as a broken kernel would leave */
		if (slot->req.inject_device_fault)
			(void) cpht_gpu_break_context();
		handle_request(slot, s);
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		cpht_worker_call_reset();
		MemoryContextSwitchTo(request_cxt);
		ed = CopyErrorData();
		FlushErrorState();
		LWLockReleaseAll();
		slot->rep.sqlerrcode = ed->sqlerrcode;
		strlcpy(slot->rep.message, ed->message ? ed->message : "", CPHT_TEXT_LEN);
		if (ed->detail)
			strlcpy(slot->rep.detail, ed->detail, CPHT_TEXT_LEN);
		if (ed->hint)
			strlcpy(slot->rep.hint, ed->hint, CPHT_TEXT_LEN);
		ereport(DEBUG1,
				(errmsg_internal("cpht worker answered a request of process %d with an error: %s",
								 slot->pid, slot->rep.message)));
	}
	PG_END_TRY();
	if (slot->req.private_table)
		cpht_private_note_bytes(s, &slot->req, &slot->rep);
	cpht_quota_end();
	slot->rep.memory_delta = cpht_private_request_end();
	serving = -1;
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(old);
	MemoryContextReset(request_cxt);
	INSTR_TIME_SET_CURRENT(end);
	INSTR_TIME_SUBTRACT(end, start);
	slot->rep.worker_ms = INSTR_TIME_GET_MILLISEC(end);
	if (slot->rep.status == CPHT_ERR_DEVICE_LOST)
	{
		char		reason[CPHT_TEXT_LEN];

		/* This request gets its own message; the worker cannot go on. */
		strlcpy(reason, slot->rep.message, sizeof(reason));
		reply(s);
		cpht_worker_device_lost(reason);
	}
	reply(s);
}

/*
 * Takes slot s's submitted request (SUBMITTED -> RUNNING); false when there
 * is none, or when its backend withdrew it on a cancel first.
 */
bool
cpht_worker_take_slot(int s)
{
	uint32		expected = CPHT_SLOT_SUBMITTED;

	return pg_atomic_compare_exchange_u32(&cpht_slots[s].state, &expected, CPHT_SLOT_RUNNING);
}

void
cpht_worker_serve(void)
{
	int			nwords = (cpht_control->nslots + 63) / 64;

	for (int w = 0; w < nwords; w++)
	{
		uint64		bits = pg_atomic_exchange_u64(&cpht_submitted[w], 0);

		while (bits != 0)
		{
			int			b = pg_rightmost_one_pos64(bits);
			int			s = w * 64 + b;

			bits &= bits - 1;
			if (s < cpht_control->nslots && cpht_worker_take_slot(s))
				serve_one(s);
		}
	}
}

void
cpht_worker_shutdown(const char *reason, int errcode)
{
	CphtControl *ctl = cpht_control;

	/* an exit from inside a request may hold the catalog lock */
	LWLockReleaseAll();
	SpinLockAcquire(&ctl->mutex);
	ctl->worker_pid = 0;
	SpinLockRelease(&ctl->mutex);
	/* the next worker restores the durable tables again */
	pg_atomic_write_u32(&ctl->durable_ready, 0);

	/* No backend waits for an answer that will not come. */
	for (int s = 0; s < ctl->nslots; s++)
	{
		CphtSlot   *slot = &cpht_slots[s];

		/* the request this worker was running, and those not yet taken */
		if (s != serving && !cpht_worker_take_slot(s))
			continue;
		memset(&slot->rep, 0, sizeof(CphtReply));
		slot->rep.sqlerrcode = errcode;
		strlcpy(slot->rep.message, "terminating cpht call because the cpht worker is exiting", CPHT_TEXT_LEN);
		snprintf(slot->rep.detail, CPHT_TEXT_LEN,
				 "Tables in the cpht worker are lost when it exits: %s.", reason);
		reply(s);
	}
	SpinLockAcquire(&ctl->mutex);
	strlcpy(ctl->exit_reason, reason, CPHT_TEXT_LEN);
	SpinLockRelease(&ctl->mutex);

	LWLockAcquire(ctl->catalog_lock, LW_EXCLUSIVE);
	for (int i = 0; i < ctl->max_tables; i++)
	{
		if (cpht_catalog[i].state == CPHT_ENTRY_LIVE)
		{
			cpht_catalog[i].state = CPHT_ENTRY_LOST;
			strlcpy(cpht_catalog[i].lost_reason, reason, CPHT_TEXT_LEN);
		}
	}
	LWLockRelease(ctl->catalog_lock);
}
