/*
 * insert_new.c — cpht_insert_new(handle, source, target, key_column):
 * inserts into target the rows of source whose key was new, one row per
 * new key, and returns how many rows the INSERT inserted.  It does what
 *     INSERT INTO target
 *     SELECT * FROM cpht_fop_rows(handle, NULL::source, 'SELECT * FROM source', key_column)
 * does, at close to the cost of the INSERT alone.
 *
 * Fast path, for a source that relscan.c's parallel scan reads as a query
 * would (a plain heap table, no children, no row-level security for the
 * caller): the scan's workers send each row's key and tid; the leader hands
 * the keys to the table in batches and keeps the tids of the rows whose key
 * the table reported new (once per new key, within a batch and across
 * batches).  When the scan is over, and parallel mode with it, the tids are
 * sorted into heap order and
 *     INSERT INTO target SELECT * FROM ONLY source WHERE ctid = ANY ($1)
 * runs once per TID_CHUNK of them: a TID scan under the scan's snapshot,
 * so it reads exactly the rows the scan saw.  Into a target with a B-tree
 * index led by the key, the statement adds ORDER BY key (see
 * target_indexed_by_key).  The INSERT is an ordinary
 * one: target's typmods, domains, defaults, constraints, triggers, indexes
 * and policies apply, and it belongs to the caller's (sub)transaction, as
 * the table's keys do.
 *
 * Any other source runs the cpht_fop_rows statement above.
 *
 * Either statement is planned, and its permissions checked (SELECT on
 * source, INSERT on target), before any key goes to the table: a call the
 * caller may not make is 42501 and changes nothing, even in a table that
 * is not transactional.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"

#include "cpht_table.h"
#include "relscan.h"

/* Tids per INSERT of the fast path (an array of 24 MB). */
#define TID_CHUNK (1 << 22)

/* Packed tids in ascending order. */
#define ST_SORT sort_packed_tids
#define ST_ELEMENT_TYPE uint64
#define ST_COMPARE(a, b) (*(a) < *(b) ? -1 : *(a) > *(b) ? 1 : 0)
#define ST_SCOPE static
#define ST_DECLARE
#define ST_DEFINE
#include "lib/sort_template.h"

/* The tids of the rows to insert, counted against cpht.max_memory. */
typedef struct NewRows
{
	uint64	   *tids;
	uint64		n;
	uint64		cap;
} NewRows;

static void
take_new_rows(RelFeed *f, const uint64 *keys, const uint64 *tids,
			  const uint8 *status, size_t n)
{
	NewRows    *rows = f->arg;

	if (rows->n + n > rows->cap)
	{
		uint64		cap = Max(rows->cap * 2, rows->n + n);

		cpht_stream_reserve(f->stream, sizeof(uint64) * (cap - rows->cap),
							"cpht_insert_new row list");
		rows->tids = rows->tids ? repalloc_huge(rows->tids, sizeof(uint64) * cap) :
			MemoryContextAllocHuge(CurrentMemoryContext, sizeof(uint64) * cap);
		rows->cap = cap;
	}
	for (size_t i = 0; i < n; i++)
		if (status[i] == CPHT_PUT)
			rows->tids[rows->n++] = tids[i];
}

/* A relation's name, schema-qualified and quoted. */
static char *
qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * Plans sql (as a generic plan: a parameter's value never changes the
 * plan) and checks the privileges its statements need, as the executor
 * would check them when it starts.
 */
static SPIPlanPtr
plan_and_check(const char *sql, Oid argtype)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(sql, 1, &argtype, CURSOR_OPT_GENERIC_PLAN);
	CachedPlan *cplan;
	ListCell   *lc;

	if (plan == NULL)
		elog(ERROR, "SPI_prepare of \"%s\" failed: %s", sql, SPI_result_code_string(SPI_result));
	cplan = SPI_plan_get_cached_plan(plan);
	if (cplan == NULL)
		elog(ERROR, "no plan for \"%s\"", sql);
	foreach(lc, cplan->stmt_list)
	{
		PlannedStmt *stmt = lfirst_node(PlannedStmt, lc);

		if (stmt->commandType != CMD_UTILITY)
			(void) ExecCheckRTPerms(stmt->rtable, true);
	}
	/* an unsaved plan's cached plan has no resource owner */
	ReleaseCachedPlan(cplan, NULL);
	return plan;
}

/* Runs plan with $1 = value under snapshot (or a new one if invalid);
 * how many rows it inserted. */
static uint64
run_insert(SPIPlanPtr plan, Datum value, Snapshot snapshot)
{
	int			rc = SPI_execute_snapshot(plan, &value, NULL, snapshot, InvalidSnapshot,
										  false, true, 0);

	if (rc < 0)
		elog(ERROR, "SPI_execute_snapshot returned %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * Whether target has a B-tree index led by the column that source's key
 * column goes into (INSERT ... SELECT * pairs columns by position, dropped
 * ones aside).  Rows inserted in key order then extend that index leaf by
 * leaf; in heap order, with keys that do not follow the heap (random ids),
 * each row would land on a random leaf: on an H100 host, 3.75M new rows of
 * random ids into an indexed events table took 16.0 s in heap order and
 * 8.0 s in id order.
 */
static bool
target_indexed_by_key(Relation source, AttrNumber attno, Oid target_id)
{
	TupleDesc	sdesc = RelationGetDescr(source);
	Relation	target = relation_open(target_id, AccessShareLock);
	TupleDesc	tdesc = RelationGetDescr(target);
	int			position = 0;
	AttrNumber	target_attno = InvalidAttrNumber;
	bool		found = false;
	List	   *indexes;
	ListCell   *lc;

	for (int i = 0; i < attno - 1; i++)
		if (!TupleDescAttr(sdesc, i)->attisdropped)
			position++;
	for (int i = 0; i < tdesc->natts && target_attno == InvalidAttrNumber; i++)
		if (!TupleDescAttr(tdesc, i)->attisdropped && position-- == 0)
			target_attno = (AttrNumber) (i + 1);
	indexes = target_attno == InvalidAttrNumber ? NIL : RelationGetIndexList(target);
	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);

		found = index->rd_rel->relam == BTREE_AM_OID && index->rd_index->indnkeyatts > 0 &&
			index->rd_index->indkey.values[0] == target_attno;
		index_close(index, AccessShareLock);
		if (found)
			break;
	}
	list_free(indexes);
	relation_close(target, AccessShareLock);
	return found;
}

/* The fast path: the new rows' tids from relscan.c, then the TID scans. */
static uint64
insert_by_tids(int32 handle, Relation source, AttrNumber attno, Oid target)
{
	/* into an index on the key: in key order (a sort of each TID scan's rows) */
	char	   *order = target_indexed_by_key(source, attno, target)
		? psprintf(" ORDER BY %s", quote_identifier(NameStr(TupleDescAttr(RelationGetDescr(source), attno - 1)->attname)))
		: "";
	char	   *sql = psprintf("INSERT INTO %s SELECT * FROM ONLY %s WHERE ctid = ANY ($1)%s",
							   qualified_name(target),
							   qualified_name(RelationGetRelid(source)), order);
	SPIPlanPtr	plan = plan_and_check(sql, TIDARRAYOID);
	Snapshot	snapshot = RegisterSnapshot(GetActiveSnapshot());
	NewRows		rows = {0};
	RelFeed		f;
	uint64		inserted = 0;
	ArrayType  *array;

	cpht_relfeed_begin(&f, handle, true, true, take_new_rows, &rows);
	cpht_relscan_scan(&f, source, attno, 8);
	cpht_relfeed_finish(&f);

	/* in heap order the TID scans read each page once */
	sort_packed_tids(rows.tids, rows.n);
	array = palloc0(ARR_OVERHEAD_NONULLS(1) + sizeof(ItemPointerData) * Min(rows.n, TID_CHUNK));
	array->ndim = 1;
	array->dataoffset = 0;
	array->elemtype = TIDOID;
	ARR_LBOUND(array)[0] = 1;
	for (uint64 done = 0; done < rows.n; done += TID_CHUNK)
	{
		int			n = (int) Min(rows.n - done, TID_CHUNK);
		ItemPointer tids = (ItemPointer) ARR_DATA_PTR(array);

		CHECK_FOR_INTERRUPTS();
		SET_VARSIZE(array, ARR_OVERHEAD_NONULLS(1) + sizeof(ItemPointerData) * n);
		ARR_DIMS(array)[0] = n;
		for (int i = 0; i < n; i++)
			cpht_relscan_set_tid(&tids[i], rows.tids[done + i]);
		inserted += run_insert(plan, PointerGetDatum(array), snapshot);
	}
	UnregisterSnapshot(snapshot);
	return inserted;
}

/* Any other source: INSERT ... SELECT * FROM cpht_fop_rows(...). */
static uint64
insert_by_fop_rows(int32 handle, Relation source, const char *key_column, Oid target,
				   Oid fn_oid)
{
	char	   *source_name = qualified_name(RelationGetRelid(source));
	char	   *sql = psprintf("INSERT INTO %s SELECT * FROM %s.cpht_fop_rows($1, NULL::%s, %s, %s)",
							   qualified_name(target),
							   quote_identifier(get_namespace_name(get_func_namespace(fn_oid))),
							   format_type_be_qualified(RelationGetForm(source)->reltype),
							   quote_literal_cstr(psprintf("SELECT * FROM %s", source_name)),
							   quote_literal_cstr(key_column));
	SPIPlanPtr	plan = plan_and_check(sql, INT4OID);

	return run_insert(plan, Int32GetDatum(handle), InvalidSnapshot);
}

PG_FUNCTION_INFO_V1(cpht_insert_new);
Datum
cpht_insert_new(PG_FUNCTION_ARGS)
{
	int32		handle = PG_GETARG_INT32(0);
	Oid			source_id = PG_GETARG_OID(1);
	Oid			target = PG_GETARG_OID(2);
	const char *key_column = NameStr(*PG_GETARG_NAME(3));
	Relation	source;
	AttrNumber	attno;
	int16		typlen;
	uint64		inserted;

	source = relation_open(source_id, AccessShareLock);
	attno = cpht_relscan_key_column(source, key_column, true, &typlen);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (cpht_relscan_reads_all(source))
		inserted = insert_by_tids(handle, source, attno, target);
	else
		inserted = insert_by_fop_rows(handle, source, key_column, target,
									  fcinfo->flinfo->fn_oid);
	SPI_finish();
	relation_close(source, AccessShareLock);
	PG_RETURN_INT64((int64) inserted);
}
