/*
 * info.c — introspection: cpht_info() and cpht_tables().
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/tuplestore.h"

#include "cpht_table.h"
#include "errors.h"
#include "handles.h"

PG_FUNCTION_INFO_V1(cpht_info);
PG_FUNCTION_INFO_V1(cpht_tables);

static const char *
kind_name(cpht_kind kind)
{
	return kind == CPHT_CUCKOO ? "cuckoo" : "iceberg";
}

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
	CphtHandle *entry = cpht_handles_get(PG_GETARG_INT32(0));
	cpht_stats	stats;
	cpht_status status;
	StringInfoData buf;
	int			l;

	memset(&stats, 0, sizeof(stats));
	status = cpht_table_stats(entry->table, &stats);
	if (status != CPHT_OK)
		cpht_check_status(status, entry->handle,
						  cpht_table_error(entry->table));
	stats.device_name[sizeof(stats.device_name) - 1] = '\0';

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"handle\": %d, \"kind\": \"%s\", \"device\": \"%s\", ",
					 entry->handle, kind_name(stats.kind),
					 device_name(stats.device));
	appendStringInfoString(&buf, "\"device_name\": ");
	escape_json(&buf, stats.device_name);
	appendStringInfo(&buf, ", \"key_bits\": %d, \"capacity\": " INT64_FORMAT
					 ", \"count\": " UINT64_FORMAT ", \"levels\": [",
					 stats.key_bits, entry->capacity, stats.count);

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
	/* GPU tables: how much room the device has left (for sizing and for
	 * watching memory across sessions); null for CPU tables. */
	if (stats.device_total_bytes > 0)
		appendStringInfo(&buf, ", \"device_free_bytes\": " UINT64_FORMAT
						 ", \"device_total_bytes\": " UINT64_FORMAT,
						 stats.device_free_bytes, stats.device_total_bytes);
	else
		appendStringInfoString(&buf, ", \"device_free_bytes\": null, \"device_total_bytes\": null");
	appendStringInfoChar(&buf, '}');

	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/* One row per live table of this session. */
Datum
cpht_tables(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CphtHandle *entry;
	int32		after = 0;

	InitMaterializedSRF(fcinfo, 0);

	while ((entry = cpht_handles_next(after)) != NULL)
	{
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, false, false};

		values[0] = Int32GetDatum(entry->handle);
		values[1] = CStringGetTextDatum(kind_name(entry->kind));
		values[2] = CStringGetTextDatum(device_name(entry->device));
		values[3] = Int32GetDatum(entry->key_bits);
		values[4] = Int64GetDatum((int64) cpht_table_count(entry->table));
		values[5] = Int64GetDatum((int64) entry->bytes);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		after = entry->handle;
	}

	return (Datum) 0;
}
