/*
 * progress.c — the progress of a long call (cpht_stat_progress): the
 * relation functions, cpht_insert_new and the new-keys plan node report
 * the keys they sent of the keys they expect, and their phase, in this
 * backend's entry of PostgreSQL's activity array.
 *
 * PostgreSQL 15's progress reporting (pgstat_progress_start_command) knows
 * only its own commands (VACUUM, ANALYZE, CLUSTER, CREATE INDEX, BASE
 * BACKUP, COPY); an extension cannot add one.  The array's entry is
 * written with the same calls under a command number of cpht's own, which
 * no pg_stat_progress_* view shows (they each ask for one of PostgreSQL's
 * commands); cpht_stat_progress reads the entries carrying cpht's number.
 * It works without shared_preload_libraries, since the array is
 * PostgreSQL's.  A call made while the backend already reports a command
 * (a cpht function inside COPY ... TO) reports nothing, so as not to take
 * that command's place.
 *
 * A call that fails ends its report when its (sub)transaction aborts.
 */
#include "postgres.h"

#include "access/xact.h"
#include "pgstat.h"
#include "utils/backend_progress.h"
#include "utils/backend_status.h"
#include "utils/rel.h"

#include "stream/stream.h"

/* The subtransaction level the report began at; 0 when none runs. */
static int	report_level = 0;
/* cpht_progress_set_sent was called: the streams' counts are ignored */
static bool caller_counts = false;
static bool callbacks_registered = false;

static bool
reporting(void)
{
	if (report_level == 0)
		return false;
	/* ended by an abort PostgreSQL handled before our callback ran */
	if (MyBEEntry == NULL || MyBEEntry->st_progress_command != (ProgressCommandType) CPHT_PROGRESS_COMMAND)
	{
		report_level = 0;
		return false;
	}
	return true;
}

static void
end_report(void)
{
	if (reporting())
		pgstat_progress_end_command();
	report_level = 0;
}

static void
progress_xact_callback(XactEvent event, void *arg)
{
	(void) arg;
	if (report_level != 0 &&
		(event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		 event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		 event == XACT_EVENT_PREPARE))
		end_report();
}

static void
progress_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	(void) mySubid;
	(void) parentSubid;
	(void) arg;
	if (event == SUBXACT_EVENT_ABORT_SUB && report_level != 0 &&
		report_level >= GetCurrentTransactionNestLevel())
		end_report();
}

bool
cpht_progress_begin(CphtProgressOp op, int32 handle, Relation rel)
{
	int64		known = -1;

	if (MyBEEntry == NULL || !pgstat_track_activities || reporting() ||
		MyBEEntry->st_progress_command != PROGRESS_COMMAND_INVALID)
		return false;
	if (!callbacks_registered)
	{
		RegisterXactCallback(progress_xact_callback, NULL);
		RegisterSubXactCallback(progress_subxact_callback, NULL);
		callbacks_registered = true;
	}
	/* the planner's estimate of the rows, where there is one */
	if (rel != NULL && RelationGetForm(rel)->reltuples >= 0)
		known = (int64) RelationGetForm(rel)->reltuples;
	pgstat_progress_start_command((ProgressCommandType) CPHT_PROGRESS_COMMAND,
								  rel != NULL ? RelationGetRelid(rel) : InvalidOid);
	{
		const int	index[] = {CPHT_PROGRESS_OP, CPHT_PROGRESS_PHASE, CPHT_PROGRESS_HANDLE,
		CPHT_PROGRESS_KEYS_KNOWN};
		const int64 val[] = {op, CPHT_PHASE_SENDING_KEYS, handle, known};

		pgstat_progress_update_multi_param(4, index, val);
	}
	report_level = GetCurrentTransactionNestLevel();
	caller_counts = false;
	return true;
}

void
cpht_progress_phase(CphtProgressPhase phase, int64 rows_known)
{
	if (!reporting())
		return;
	pgstat_progress_update_param(CPHT_PROGRESS_PHASE, phase);
	if (rows_known >= 0)
		pgstat_progress_update_param(CPHT_PROGRESS_ROWS_KNOWN, rows_known);
}

void
cpht_progress_sent(uint64 keys, uint64 new_keys)
{
	if (!reporting() || caller_counts)
		return;
	/* PostgreSQL 15 has no pgstat_progress_incr_param: only this backend
	 * writes its entry, so it reads its own figure and writes the sum */
	pgstat_progress_update_param(CPHT_PROGRESS_KEYS_DONE,
								 MyBEEntry->st_progress_param[CPHT_PROGRESS_KEYS_DONE] + (int64) keys);
	pgstat_progress_update_param(CPHT_PROGRESS_NEW_KEYS,
								 MyBEEntry->st_progress_param[CPHT_PROGRESS_NEW_KEYS] + (int64) new_keys);
}

void
cpht_progress_set_sent(uint64 keys, uint64 new_keys)
{
	const int	index[] = {CPHT_PROGRESS_KEYS_DONE, CPHT_PROGRESS_NEW_KEYS};
	int64		val[2];

	if (!reporting())
		return;
	caller_counts = true;
	val[0] = (int64) keys;
	val[1] = (int64) new_keys;
	pgstat_progress_update_multi_param(2, index, val);
}

void
cpht_progress_rows(uint64 rows)
{
	if (!reporting())
		return;
	pgstat_progress_update_param(CPHT_PROGRESS_ROWS_DONE,
								 MyBEEntry->st_progress_param[CPHT_PROGRESS_ROWS_DONE] + (int64) rows);
}

void
cpht_progress_end(bool began)
{
	if (began)
		end_report();
}
