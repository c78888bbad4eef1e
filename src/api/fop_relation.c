/*
 * fop_relation.c — find-or-put of a whole relation's key column:
 *
 *   cpht_fop_relation(handle, rel, key_column)      how many keys were new
 *   cpht_fop_new_relation(handle, rel, key_column)  the new keys, each once
 *
 * Both read the relation through stream/ (a parallel scan of cpht's own
 * where it reads what a query would, else a query) and hand its keys to
 * the table in batches of cpht.batch_size, with no function call per row.
 */
#include "postgres.h"

#include "access/relation.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/tuplestore.h"

#include "cpht_table.h"
#include "stream/stream.h"

/* Where cpht_fop_new_relation puts the new keys. */
typedef struct NewKeys
{
	Tuplestorestate *out;
	TupleDesc	desc;
} NewKeys;

static void
take_new_keys(RelFeed *f, const uint64 *keys, const uint64 *tids,
			  const uint8 *status, size_t n)
{
	NewKeys    *nk = f->arg;

	for (size_t i = 0; i < n; i++)
	{
		if (status[i] == CPHT_PUT)
		{
			Datum		d = Int64GetDatum((int64) keys[i]);
			bool		isnull = false;

			tuplestore_putvalues(nk->out, nk->desc, &d, &isnull);
		}
	}
}

/* Feeds rel's key column into the table; the keys the table reported new
 * go to take (NULL: only counted). */
static uint64
fop_relation(FunctionCallInfo fcinfo, RelFeedTake take, void *arg)
{
	int32		handle = PG_GETARG_INT32(0);
	Oid			relid = PG_GETARG_OID(1);
	const char *key_column = NameStr(*PG_GETARG_NAME(2));
	RelFeed		f;
	Relation	rel;
	AttrNumber	attno;
	int16		typlen;
	bool		began;

	cpht_relfeed_begin(&f, handle, false, false, take, arg);
	rel = relation_open(relid, AccessShareLock);
	attno = cpht_relscan_key_column(rel, key_column, false, &typlen);
	cpht_relscan_check_select(rel, attno);
	/* cpht_stat_progress: keys sent of the rows the planner expects */
	began = cpht_progress_begin(take != NULL ? CPHT_PROGRESS_FOP_NEW_RELATION :
								CPHT_PROGRESS_FOP_RELATION, handle, rel);
	if (cpht_relscan_reads_all(rel))
		cpht_relscan_scan(&f, rel, attno, typlen);
	else
		cpht_relscan_query(&f, rel, key_column, typlen);
	relation_close(rel, AccessShareLock);
	cpht_relfeed_finish(&f, take != NULL ? "cpht_fop_new_relation" : "cpht_fop_relation");
	cpht_progress_end(began);
	return f.inserted;
}

PG_FUNCTION_INFO_V1(cpht_fop_relation);
Datum
cpht_fop_relation(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64((int64) fop_relation(fcinfo, NULL, NULL));
}

PG_FUNCTION_INFO_V1(cpht_fop_new_relation);
Datum
cpht_fop_new_relation(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	NewKeys		nk;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	nk.out = rsinfo->setResult;
	nk.desc = rsinfo->setDesc;
	(void) fop_relation(fcinfo, take_new_keys, &nk);
	return (Datum) 0;
}
