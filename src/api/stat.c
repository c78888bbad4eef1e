/*
 * stat.c — monitoring: cpht_stat_tables() (the shared tables' statistics,
 * counted by the cpht worker in its catalog, protocol.h), cpht_stat_reset()
 * and cpht_stat_progress() (the long calls of every backend, from
 * PostgreSQL's activity array, stream/progress.c).
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "session/session.h"
#include "stream/stream.h"

#define STAT_TABLES_COLUMNS 18

/*
 * One row per shared table of this database that the role may use (as
 * cpht_tables() shows them): its figures, and its counters since it was
 * created, restored or reset.  Empty without shared_preload_libraries.
 */
PG_FUNCTION_INFO_V1(cpht_stat_tables);
Datum
cpht_stat_tables(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[STAT_TABLES_COLUMNS];
	bool		nulls[STAT_TABLES_COLUMNS];
	XLogRecPtr	insert_lsn = RecoveryInProgress() ? InvalidXLogRecPtr : GetXLogInsertRecPtr();

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != STAT_TABLES_COLUMNS)
		elog(ERROR, "cpht_stat_tables returns %d columns", STAT_TABLES_COLUMNS);
	if (cpht_control == NULL)
		return (Datum) 0;
	/* durable tables are listed once the worker restored them */
	cpht_shared_wait_restored();
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *live = &cpht_catalog[i];
		CphtTableStats *st = &live->stats;
		CphtCatalogEntry e;
		uint64		snapshot_lsn,
					snapshot_time,
					keep_lsn;
		int			c = 0;

		LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
		e = *live;
		LWLockRelease(cpht_control->catalog_lock);
		if (e.state != CPHT_ENTRY_LIVE || e.dboid != MyDatabaseId)
			continue;
		/* as cpht_open: only the tables the role may use are shown */
		if (!has_privs_of_role(GetUserId(), e.owner))
			continue;

		memset(nulls, 0, sizeof(nulls));
		values[c] = Int32GetDatum(CPHT_SHARED_HANDLE_BASE + (int32) e.table_id);
		nulls[c++] = e.table_id > CPHT_MAX_SHARED_TABLE_ID;
		values[c++] = CStringGetTextDatum(NameStr(e.name));
		values[c++] = ObjectIdGetDatum(e.owner);
		values[c++] = BoolGetDatum(e.durable);
		values[c++] = BoolGetDatum(e.transactional);
		values[c++] = Int64GetDatum((int64) pg_atomic_read_u64(&live->count));
		values[c++] = Int64GetDatum((int64) e.bytes);
		values[c++] = Int64GetDatum((int64) pg_atomic_read_u64(&st->calls));
		values[c++] = Int64GetDatum((int64) pg_atomic_read_u64(&st->keys));
		values[c++] = Int64GetDatum((int64) pg_atomic_read_u64(&st->new_keys));
		values[c++] = Float8GetDatum((double) pg_atomic_read_u64(&st->time_us) / 1000.0);
		values[c++] = Int64GetDatum((int64) pg_atomic_read_u64(&st->waits));
		values[c++] = Int64GetDatum((int64) pg_atomic_read_u64(&st->growths));
		snapshot_lsn = pg_atomic_read_u64(&st->snapshot_lsn);
		snapshot_time = pg_atomic_read_u64(&st->snapshot_time);
		keep_lsn = pg_atomic_read_u64(&st->wal_keep_lsn);
		/* durable tables alone have snapshots and keep WAL */
		values[c] = LSNGetDatum((XLogRecPtr) snapshot_lsn);
		nulls[c++] = !e.durable || snapshot_lsn == 0;
		values[c] = TimestampTzGetDatum((TimestampTz) snapshot_time);
		nulls[c++] = !e.durable || snapshot_time == 0;
		values[c] = LSNGetDatum((XLogRecPtr) keep_lsn);
		nulls[c++] = !e.durable || keep_lsn == 0;
		values[c] = Int64GetDatum(insert_lsn > keep_lsn ? (int64) (insert_lsn - keep_lsn) : 0);
		nulls[c++] = !e.durable || keep_lsn == 0 || insert_lsn == InvalidXLogRecPtr;
		values[c++] = TimestampTzGetDatum((TimestampTz) pg_atomic_read_u64(&st->reset_time));
		Assert(c == STAT_TABLES_COLUMNS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * cpht_stat_reset(name => NULL): the counters of this database's shared
 * tables back to zero, or of the one named; the durable figures (snapshot,
 * WAL kept) are the table's state and stay.  Who may call it is a matter
 * of EXECUTE (revoked from PUBLIC), as for pg_stat_statements_reset.
 */
PG_FUNCTION_INFO_V1(cpht_stat_reset);
Datum
cpht_stat_reset(PG_FUNCTION_ARGS)
{
	const char *name = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	uint64		now = (uint64) GetCurrentTimestamp();
	bool		found = false;

	if (cpht_control == NULL)
		PG_RETURN_VOID();
	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];
		CphtTableStats *st = &e->stats;

		if (e->state != CPHT_ENTRY_LIVE || e->dboid != MyDatabaseId ||
			(name != NULL && strcmp(NameStr(e->name), name) != 0))
			continue;
		found = true;
		pg_atomic_write_u64(&st->calls, 0);
		pg_atomic_write_u64(&st->keys, 0);
		pg_atomic_write_u64(&st->new_keys, 0);
		pg_atomic_write_u64(&st->time_us, 0);
		pg_atomic_write_u64(&st->waits, 0);
		pg_atomic_write_u64(&st->growths, 0);
		pg_atomic_write_u64(&st->reset_time, now);
	}
	LWLockRelease(cpht_control->catalog_lock);
	if (name != NULL && !found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("shared cpht table \"%s\" does not exist", name)));
	PG_RETURN_VOID();
}

static const char *
progress_op_name(int64 op)
{
	switch (op)
	{
		case CPHT_PROGRESS_FOP_RELATION:
			return "cpht_fop_relation";
		case CPHT_PROGRESS_FOP_NEW_RELATION:
			return "cpht_fop_new_relation";
		case CPHT_PROGRESS_INSERT_NEW:
			return "cpht_insert_new";
		case CPHT_PROGRESS_FOP_ROWS:
			return "cpht_fop_rows";
	}
	return "unknown";
}

static const char *
progress_phase_name(int64 phase)
{
	switch (phase)
	{
		case CPHT_PHASE_SENDING_KEYS:
			return "sending keys";
		case CPHT_PHASE_SORTING_ROWS:
			return "sorting new rows";
		case CPHT_PHASE_INSERTING_ROWS:
			return "inserting new rows";
	}
	return "unknown";
}

/* The name of the shared table a handle names, or NULL. */
static char *
shared_table_name(int64 handle)
{
	char	   *name = NULL;
	uint64		id;

	if (cpht_control == NULL || handle <= CPHT_SHARED_HANDLE_BASE)
		return NULL;
	id = (uint64) (handle - CPHT_SHARED_HANDLE_BASE);
	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	for (int i = 0; i < cpht_control->max_tables; i++)
		if (cpht_catalog[i].state == CPHT_ENTRY_LIVE && cpht_catalog[i].table_id == id)
		{
			name = pstrdup(NameStr(cpht_catalog[i].name));
			break;
		}
	LWLockRelease(cpht_control->catalog_lock);
	return name;
}

#define STAT_PROGRESS_COLUMNS 12

/*
 * One row per backend running a long cpht call (stream/progress.c), as
 * pg_stat_progress_* shows them: to members of pg_read_all_stats every
 * backend, to other roles the backends of roles whose privileges they
 * have.  keys_known and rows_known are null when not known.
 */
PG_FUNCTION_INFO_V1(cpht_stat_progress);
Datum
cpht_stat_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			n = pgstat_fetch_stat_numbackends();
	bool		all_stats = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != STAT_PROGRESS_COLUMNS)
		elog(ERROR, "cpht_stat_progress returns %d columns", STAT_PROGRESS_COLUMNS);
	for (int b = 1; b <= n; b++)
	{
		LocalPgBackendStatus *local = pgstat_fetch_stat_local_beentry(b);
		PgBackendStatus *be;
		const int64 *p;
		Datum		values[STAT_PROGRESS_COLUMNS];
		bool		nulls[STAT_PROGRESS_COLUMNS];
		char	   *name;
		int			c = 0;

		if (local == NULL)
			continue;
		be = &local->backendStatus;
		if (be->st_progress_command != (ProgressCommandType) CPHT_PROGRESS_COMMAND)
			continue;
		if (!all_stats && !has_privs_of_role(GetUserId(), be->st_userid))
			continue;
		p = be->st_progress_param;
		memset(nulls, 0, sizeof(nulls));
		values[c++] = Int32GetDatum(be->st_procpid);
		values[c++] = ObjectIdGetDatum(be->st_databaseid);
		values[c] = ObjectIdGetDatum(be->st_progress_command_target);
		nulls[c++] = !OidIsValid(be->st_progress_command_target);
		values[c++] = CStringGetTextDatum(progress_op_name(p[CPHT_PROGRESS_OP]));
		values[c++] = CStringGetTextDatum(progress_phase_name(p[CPHT_PROGRESS_PHASE]));
		values[c++] = Int32GetDatum((int32) p[CPHT_PROGRESS_HANDLE]);
		name = shared_table_name(p[CPHT_PROGRESS_HANDLE]);
		values[c] = name ? CStringGetTextDatum(name) : (Datum) 0;
		nulls[c++] = name == NULL;
		values[c++] = Int64GetDatum(p[CPHT_PROGRESS_KEYS_DONE]);
		values[c] = Int64GetDatum(p[CPHT_PROGRESS_KEYS_KNOWN]);
		nulls[c++] = p[CPHT_PROGRESS_KEYS_KNOWN] < 0;
		values[c++] = Int64GetDatum(p[CPHT_PROGRESS_NEW_KEYS]);
		values[c++] = Int64GetDatum(p[CPHT_PROGRESS_ROWS_DONE]);
		values[c] = Int64GetDatum(p[CPHT_PROGRESS_ROWS_KNOWN]);
		/* a phase over rows says how many (cpht_insert_new's) */
		nulls[c++] = p[CPHT_PROGRESS_PHASE] == CPHT_PHASE_SENDING_KEYS;
		Assert(c == STAT_PROGRESS_COLUMNS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
