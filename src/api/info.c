/*
 * info.c — introspection: cpht_info() and cpht_tables(), of private and
 * shared tables.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "catalog/pg_authid.h"
#include "utils/acl.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "cpht_table.h"
#include "errors.h"
#include "session/session.h"
#include "api/lifecycle.h"

PG_FUNCTION_INFO_V1(cpht_info);
PG_FUNCTION_INFO_V1(cpht_tables);

static const char *
device_name(cpht_device device)
{
	return device == CPHT_DEVICE_GPU ? "gpu" : "cpu";
}

/*
 * The statistics as a JSON text, parsed into jsonb at the end: simpler than
 * pushing jsonb values one by one, and cpht_info() is not on a hot path.
 */
Datum
cpht_info(PG_FUNCTION_ARGS)
{
	int32		handle = PG_GETARG_INT32(0);
	CphtHandleEntry *entry = cpht_handles_use(handle);
	cpht_stats	stats;
	cpht_status status;
	StringInfoData buf;
	char		name[NAMEDATALEN];
	Oid			owner = InvalidOid;
	int			l;

	memset(&stats, 0, sizeof(stats));
	/* a shared table's name and owner, the role's right to see them */
	if (entry->shared)
		(void) cpht_shared_ref(handle, name, &owner);
	status = cpht_tableref_stats(cpht_handle_table(entry), &stats);
	if (status != CPHT_OK)
		cpht_check_status(status, entry->handle,
						  cpht_tableref_error(cpht_handle_table(entry)));

	stats.device_name[sizeof(stats.device_name) - 1] = '\0';

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"handle\": %d, \"kind\": \"%s\", \"device\": \"%s\", ",
					 entry->handle, cpht_kind_name(stats.kind),
					 device_name(stats.device));
	appendStringInfoString(&buf, "\"device_name\": ");
	escape_json(&buf, stats.device_name);
	/*
	 * Key width: key_bits as declared, or (automatic) the widest key so
	 * far, signed when negative keys are folded; slot_key_bits the widest
	 * key the slots hold before they must widen.
	 */
	appendStringInfo(&buf, ", \"key_bits\": %d, \"key_width\": \"%s\", \"signed_keys\": %s"
					 ", \"slot_key_bits\": %d, \"widens\": " UINT64_FORMAT,
					 stats.key_bits, stats.auto_key_bits ? "auto" : "declared",
					 stats.signed_keys ? "true" : "false", stats.slot_key_bits, stats.widens);
	if (stats.widens > 0)
		appendStringInfo(&buf, ", \"last_widen_ms\": %.3f", stats.last_widen_ms);
	else
		appendStringInfoString(&buf, ", \"last_widen_ms\": null");
	appendStringInfo(&buf, ", \"capacity\": " INT64_FORMAT
					 ", \"count\": " UINT64_FORMAT ", \"levels\": [",
					 entry->capacity, stats.count);

	for (l = 0; l < stats.levels && l < CPHT_MAX_LEVELS; l++)
	{
		double		fill = stats.slots[l] > 0 ?
			(double) stats.live[l] / (double) stats.slots[l] : 0.0;

		appendStringInfo(&buf,
						 "%s{\"slots\": " UINT64_FORMAT ", \"bucket_slots\": %d"
						 ", \"slot_bits\": %d, \"live\": " UINT64_FORMAT
						 ", \"tombstones\": " UINT64_FORMAT ", \"fill\": %.6f}",
						 l > 0 ? ", " : "",
						 stats.slots[l], stats.bucket_slots[l],
						 stats.slot_bits[l], stats.live[l],
						 stats.tombstones[l], fill);
	}

	appendStringInfo(&buf, "], \"bytes\": " UINT64_FORMAT
					 ", \"staging_bytes\": " UINT64_FORMAT
					 ", \"stashed\": " UINT64_FORMAT
					 ", \"transactional\": %s, \"undo_log_entries\": " UINT64_FORMAT
					 ", \"undo_log_bytes\": " UINT64_FORMAT,
					 stats.table_bytes, stats.staging_bytes, stats.stashed,
					 entry->transactional ? "true" : "false",
					 stats.log_entries, stats.log_bytes);
	/*
	 * Growth: how often and when the table grew from the layout it was
	 * created with (initial_slots), and the slot memory per stored key.
	 */
	appendStringInfo(&buf, ", \"initial_slots\": " UINT64_FORMAT ", \"grows\": " UINT64_FORMAT,
					 stats.initial_slots, stats.grows);
	if (stats.grows > 0)
	{
		TimestampTz at = (TimestampTz) stats.last_grow_at_us -
			((TimestampTz) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY);

		appendStringInfo(&buf, ", \"last_grow_ms\": %.3f, \"last_grow_at\": ", stats.last_grow_ms);
		escape_json(&buf, timestamptz_to_str(at));
	}
	else
		appendStringInfoString(&buf, ", \"last_grow_ms\": null, \"last_grow_at\": null");
	if (stats.count > 0)
		appendStringInfo(&buf, ", \"bytes_per_key\": %.3f", (double) stats.table_bytes / (double) stats.count);
	else
		appendStringInfoString(&buf, ", \"bytes_per_key\": null");
	/* GPU tables: how much room the device has left (for sizing and for
	 * watching memory across sessions); null for CPU tables. */
	if (stats.device_total_bytes > 0)
		appendStringInfo(&buf, ", \"device_free_bytes\": " UINT64_FORMAT
						 ", \"device_total_bytes\": " UINT64_FORMAT,
						 stats.device_free_bytes, stats.device_total_bytes);
	else
		appendStringInfoString(&buf, ", \"device_free_bytes\": null, \"device_total_bytes\": null");
	/* Its shards (one for a table created without shards): device, keys, fill. */
	appendStringInfoString(&buf, ", \"shards\": [");
	for (int s = 0; s < stats.shards && s < CPHT_MAX_SHARDS; s++)
	{
		const cpht_shard_stats *sh = &stats.shard[s];

		appendStringInfo(&buf, "%s{\"device\": \"%s\", \"gpu\": ", s > 0 ? ", " : "",
						 device_name(sh->device));
		if (sh->gpu >= 0)
			appendStringInfo(&buf, "%d", sh->gpu);
		else
			appendStringInfoString(&buf, "null");
		appendStringInfo(&buf, ", \"count\": " UINT64_FORMAT ", \"slots\": " UINT64_FORMAT
						 ", \"fill\": %.6f, \"bytes\": " UINT64_FORMAT ", \"grows\": " UINT64_FORMAT "}",
						 sh->count, sh->slots,
						 sh->slots > 0 ? (double) sh->live / (double) sh->slots : 0.0,
						 sh->table_bytes, sh->grows);
	}
	appendStringInfoChar(&buf, ']');
	/* Where the table lives: this backend, or the cpht worker (shared). */
	if (entry->shared)
	{
		char	   *role = GetUserNameFromId(owner, true);

		appendStringInfoString(&buf, ", \"shared\": true, \"placement\": \"worker\", \"name\": ");
		escape_json(&buf, name);
		appendStringInfoString(&buf, ", \"owner\": ");
		if (role)
			escape_json(&buf, role);
		else
			appendStringInfoString(&buf, "null");
	}
	else
		appendStringInfo(&buf, ", \"shared\": false, \"placement\": \"%s\", \"name\": null, \"owner\": null",
						 cpht_tableref_placement(entry->table));
	appendStringInfoChar(&buf, '}');

	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

#define TABLES_COLUMNS 10

/*
 * One row per live private table of this session, then one per shared
 * table of this database that the role may use (handle null where this
 * session has not opened it); the tables of other roles are not shown.  The columns name, owner, shared and placement came with 0.2; an
 * installation of 0.1 asks for the first six only.
 */
Datum
cpht_tables(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CphtHandleEntry *entry;
	int32		after = 0;
	Datum		values[TABLES_COLUMNS];
	bool		nulls[TABLES_COLUMNS];

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts > TABLES_COLUMNS)
		elog(ERROR, "cpht_tables returns at most %d columns", TABLES_COLUMNS);

	while ((entry = cpht_handles_next(after)) != NULL)
	{
		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(entry->handle);
		values[1] = CStringGetTextDatum(cpht_kind_name(entry->kind));
		values[2] = CStringGetTextDatum(device_name(entry->device));
		values[3] = Int32GetDatum(entry->key_bits);
		nulls[3] = entry->key_bits == 0;	/* the width follows the keys */
		/* a table lost with its worker has no count left */
		if (cpht_tableref_lost(entry->table))
			nulls[4] = true;
		else
			values[4] = Int64GetDatum((int64) cpht_tableref_count(entry->table));
		/* what it has now: it may have grown since created */
		values[5] = Int64GetDatum((int64) cpht_tableref_slot_bytes(entry->table, entry->bytes));
		nulls[6] = nulls[7] = true;
		values[8] = BoolGetDatum(false);
		values[9] = CStringGetTextDatum(cpht_tableref_placement(entry->table));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		after = entry->handle;
	}

	if (cpht_control == NULL)
		return (Datum) 0;
	/* a standby's worker holds durable tables only for their files: say so */
	if (RecoveryInProgress())
		ereport(NOTICE,
				(errmsg("durable shared cpht tables are not listed on a standby"),
				 errdetail("The cpht worker keeps their files up to date and opens them when the server is promoted; the primary lists them, and cpht_stat_tables shows how far the standby's files are.")));
	/* durable tables are listed once the worker restored them */
	cpht_shared_wait_restored();
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry e;
		int32		handle;

		LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
		e = cpht_catalog[i];
		LWLockRelease(cpht_control->catalog_lock);
		if (e.state != CPHT_ENTRY_LIVE || e.dboid != MyDatabaseId)
			continue;
		if (e.durable && RecoveryInProgress())
			continue;
		/* as cpht_open: not another transaction's uncommitted creation,
		 * nor a table this one dropped */
		if (!cpht_shared_entry_visible(i, &e))
			continue;
		/* as cpht_open: only the tables the role may use are shown */
		if (!has_privs_of_role(GetUserId(), e.owner))
			continue;

		memset(nulls, 0, sizeof(nulls));
		/* its handle is the same number in every session, opened or not */
		handle = e.table_id <= CPHT_MAX_SHARED_TABLE_ID ?
			CPHT_SHARED_HANDLE_BASE + (int32) e.table_id : 0;
		values[0] = Int32GetDatum(handle);
		nulls[0] = handle == 0;
		values[1] = CStringGetTextDatum(cpht_kind_name(e.kind));
		values[2] = CStringGetTextDatum(device_name(e.device));
		values[3] = Int32GetDatum(e.key_bits);
		nulls[3] = e.key_bits == 0;
		values[4] = Int64GetDatum((int64) pg_atomic_read_u64(&cpht_catalog[i].count));
		values[5] = Int64GetDatum((int64) e.bytes);
		values[6] = CStringGetTextDatum(NameStr(e.name));
		values[7] = ObjectIdGetDatum(e.owner);
		values[8] = BoolGetDatum(true);
		values[9] = CStringGetTextDatum("worker");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * cpht_worker_info(): the cpht worker as this backend sees it: whether cpht
 * was preloaded, the worker's pid (null while none runs), how often a
 * worker started, the live shared tables of all databases, the transfer
 * windows (free ones are not held by any call), the private tables the
 * worker holds for backends, whether the arena is pinned for DMA, and the
 * worker's GPU (usable, or why not; its name and memory).  The worker is
 * connected to no database: pg_stat_activity lists it without one.
 */
PG_FUNCTION_INFO_V1(cpht_worker_info);
Datum
cpht_worker_info(PG_FUNCTION_ARGS)
{
	StringInfoData buf;
	int			pid;
	uint64		generation;
	uint64		free_windows;
	CphtControl gpu;
	int			tables = 0;
	bool		all_stats;

	initStringInfo(&buf);
	if (cpht_control == NULL)
	{
		appendStringInfoString(&buf, "{\"preloaded\": false, \"worker_pid\": null}");
		PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
	}
	SpinLockAcquire(&cpht_control->mutex);
	pid = cpht_control->worker_pid;
	generation = cpht_control->generation;
	free_windows = cpht_control->window_free;
	gpu = *cpht_control;
	SpinLockRelease(&cpht_control->mutex);
	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	for (int i = 0; i < cpht_control->max_tables; i++)
		if (cpht_catalog[i].state == CPHT_ENTRY_LIVE)
			tables++;
	LWLockRelease(cpht_control->catalog_lock);

	appendStringInfo(&buf, "{\"preloaded\": true, \"worker_pid\": ");
	if (pid != 0)
		appendStringInfo(&buf, "%d", pid);
	else
		appendStringInfoString(&buf, "null");
	/*
	 * What every database and session holds is for roles that may read
	 * every session's statistics (pg_read_all_stats, as pg_stat_activity
	 * has it); others get null for those figures.
	 */
	all_stats = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	appendStringInfo(&buf, ", \"worker_starts\": " UINT64_FORMAT ", \"shared_tables\": %s"
					 ", \"max_shared_tables\": %d, \"max_shared_tables_per_database\": %d"
					 ", \"windows\": %d, \"windows_free\": %d"
					 ", \"window_keys\": " UINT64_FORMAT,
					 generation, all_stats ? psprintf("%d", tables) : "null", cpht_control->max_tables,
					 gpu.max_tables_per_database, cpht_control->nwindows,
					 pg_popcount64(free_windows), cpht_control->window_keys);
	/* private tables of all backends, and the worker's GPU */
	appendStringInfo(&buf, ", \"private_tables\": %s, \"private_bytes\": %s"
					 ", \"arena_pinned\": %s, \"gpu\": {\"usable\": %s, \"reason\": ",
					 all_stats ? psprintf("%d", gpu.private_tables) : "null",
					 all_stats ? psprintf(UINT64_FORMAT, gpu.private_bytes) : "null",
					 gpu.arena_registered ? "true" : "false",
					 gpu.gpu_state == CPHT_GPU_USABLE ? "true" :
					 gpu.gpu_state == CPHT_GPU_UNUSABLE ? "false" : "null");
	if (gpu.gpu_state == CPHT_GPU_UNUSABLE)
		escape_json(&buf, gpu.gpu_reason);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfoString(&buf, ", \"name\": ");
	if (gpu.gpu_state == CPHT_GPU_USABLE)
		escape_json(&buf, gpu.gpu_name);
	else
		appendStringInfoString(&buf, "null");
	if (gpu.gpu_state == CPHT_GPU_USABLE)
		appendStringInfo(&buf, ", \"total_bytes\": " UINT64_FORMAT ", \"free_bytes_at_start\": " UINT64_FORMAT "}}",
						 gpu.gpu_total_bytes, gpu.gpu_free_bytes);
	else
		appendStringInfoString(&buf, ", \"total_bytes\": null, \"free_bytes_at_start\": null}}");
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}
