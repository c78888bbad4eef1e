/*
 * insert_new.c — cpht_insert_new(handle, source, target, key_column):
 * inserts into target the rows of source whose key was new, one row per
 * new key, and returns how many rows the INSERT inserted.  It does what
 *     INSERT INTO target
 *     SELECT * FROM cpht_fop_rows(handle, NULL::source, 'SELECT * FROM source', key_column)
 * does, at close to the cost of the INSERT alone.
 *
 * Fast path, for a source that stream/heap_feed.c's parallel scan reads as a query
 * would (a plain heap table, no children, no row-level security for the
 * caller): the scan's workers send each row's key and tid; the leader hands
 * the keys to the table in batches and keeps the key and tid of each row
 * whose key the table reported new (once per new key, within a batch and
 * across batches).  When the scan is over, and parallel mode with it, the
 * rows are sorted into the order they go into target, and
 *     INSERT INTO target SELECT * FROM ONLY source
 *     WHERE ctid OPERATOR(pg_catalog.=) ANY ($1)
 * runs once per chunk of them, under the scan's snapshot, so it reads
 * exactly the rows the scan saw.  The scan under it is plan/rows_by_tid_node.c's
 * node, which returns the rows in the order of $1.  Into a target with a
 * B-tree index led by the key (target_indexed_by_key) that order is the
 * keys' order, in chunks that are ranges of keys; else it is heap order.
 * The INSERT is an ordinary one: target's typmods, domains, defaults,
 * constraints, triggers, indexes and policies apply, and it belongs to the
 * caller's (sub)transaction, as the table's keys do.
 *
 * Any other source runs the cpht_fop_rows statement above.
 *
 * Either statement names every relation, function, operator and type by
 * its schema: nothing in the caller's search_path runs in it.
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
#include "storage/bufmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"

#include "cpht_table.h"
#include "memcap.h"
#include "stream/stream.h"
#include "plan/plan.h"

/* Rows per INSERT of the fast path, at most (an array of 24 MB). */
#define TID_CHUNK (1 << 22)

/* Rows per INSERT in key order, at least (unless cpht.max_memory leaves
 * less room): the node under it holds a chunk's rows in memory (see
 * key_order_chunk), and each chunk reads its rows' pages again. */
#define KEY_ORDER_MIN_CHUNK (1 << 16)

/*
 * The rows to insert: each as the word it is sorted by (the key, as a
 * signed number, when they go in key order; else the packed tid) and its
 * packed tid.  They live in their own memory context, whose reset gives
 * back what they count against cpht.max_memory (`reserved`, with the
 * sort's buffer while it lives) however the call ends.
 */
typedef struct NewRows
{
	bool		key_order;
	cpht_key_index *rows;
	uint64		n;
	uint64		cap;
	uint64		seen;			/* rows the scan read */
	MemoryContext cxt;
	CphtReserved reserved;
} NewRows;

static void
take_new_rows(RelFeed *f, const uint64 *keys, const uint64 *tids,
			  const uint8 *status, size_t n)
{
	NewRows    *rows = f->arg;

	rows->seen += n;
	if (rows->n + n > rows->cap)
	{
		uint64		cap = Max(rows->cap * 2, rows->n + n);

		cpht_reserved_add(&rows->reserved, sizeof(cpht_key_index) * (cap - rows->cap), "cpht_insert_new row list");
		rows->rows = rows->rows ? repalloc_huge(rows->rows, sizeof(cpht_key_index) * cap) :
			MemoryContextAllocHuge(rows->cxt, sizeof(cpht_key_index) * cap);
		rows->cap = cap;
	}
	for (size_t i = 0; i < n; i++)
		if (status[i] == CPHT_PUT)
		{
			cpht_key_index *r = &rows->rows[rows->n++];

			/* the sign bit flipped: unsigned order is then bigint order */
			r->key = rows->key_order ? keys[i] ^ ((uint64) 1 << 63) : tids[i];
			r->index = tids[i];
		}
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

/*
 * Rows per INSERT in key order: as many as the node under it holds in the
 * larger of work_mem and maintenance_work_mem, judged by the source's bytes
 * per row (its pages over the rows the scan read) plus the node's
 * bookkeeping per row.  maintenance_work_mem counts because the node sorts
 * the rows for an index, as CREATE INDEX does, once per call: at the
 * default work_mem (4MB) 3.75M new rows took 58 INSERTs, each reading its
 * rows' pages of source again.  The node counts what it holds against
 * cpht.max_memory, so under a cap a chunk takes at most half of what the
 * cap leaves (the rows' sizes vary, and its last block of rows is part
 * empty), however few rows that is.
 */
static uint64
key_order_chunk(Relation source, uint64 seen)
{
	uint64		bytes = (uint64) RelationGetNumberOfBlocks(source) * BLCKSZ;
	uint64		per_row = bytes / Max(seen, 1) + 3 * sizeof(cpht_key_index);
	uint64		rows = (uint64) Max(work_mem, maintenance_work_mem) * 1024 / per_row;
	uint64		budget = cpht_memory_budget();

	rows = Min(Max(rows, KEY_ORDER_MIN_CHUNK), TID_CHUNK);
	if (budget != PG_UINT64_MAX)
		rows = Min(rows, Max(budget / 2 / per_row, 1));
	return rows;
}

/* The fast path: the new rows from stream/heap_feed.c, sorted, then the INSERTs. */
static uint64
insert_by_tids(int32 handle, Relation source, AttrNumber attno, Oid target)
{
	char	   *sql = psprintf("INSERT INTO %s SELECT * FROM ONLY %s "
							   "WHERE ctid OPERATOR(pg_catalog.=) ANY ($1)",
							   qualified_name(target),
							   qualified_name(RelationGetRelid(source)));
	Snapshot	snapshot = RegisterSnapshot(GetActiveSnapshot());
	MemoryContext rows_cxt,
				scan_cxt,
				old;
	NewRows    *rows;
	bool		key_order;
	RelFeed		f;
	volatile uint64 inserted = 0;
	uint64		chunk;
	ArrayType  *array;
	SPIPlanPtr	plan;
	Oid			prev_plan_for;

	/* into an index on the key: in key order */
	key_order = target_indexed_by_key(source, attno, target);
	/* the planner puts the node that keeps $1's order under the INSERT */
	prev_plan_for = cpht_rows_by_tid_plan_for(RelationGetRelid(source));
	PG_TRY();
	{
		plan = plan_and_check(sql, TIDARRAYOID);

		/*
		 * The rows go to a context of their own (NewRows).  The scan's
		 * stream, with its batch buffers, lives in another, deleted once
		 * the scan is done: what the buffers count against cpht.max_memory
		 * is then free for the INSERTs.
		 */
		rows_cxt = AllocSetContextCreate(CurrentMemoryContext, "cpht_insert_new rows",
										 ALLOCSET_DEFAULT_SIZES);
		rows = MemoryContextAllocZero(rows_cxt, sizeof(NewRows));
		rows->cxt = rows_cxt;
		rows->key_order = key_order;
		cpht_reserved_init(&rows->reserved, rows_cxt);
		scan_cxt = AllocSetContextCreate(CurrentMemoryContext, "cpht_insert_new scan",
										 ALLOCSET_DEFAULT_SIZES);
		old = MemoryContextSwitchTo(scan_cxt);
		cpht_relfeed_begin(&f, handle, true, true, take_new_rows, rows);
		cpht_relscan_scan(&f, source, attno, 8);
		cpht_relfeed_finish(&f, "cpht_insert_new");
		MemoryContextSwitchTo(old);
		MemoryContextDelete(scan_cxt);

		/* the sort's buffer is counted while it lives */
		cpht_progress_phase(CPHT_PHASE_SORTING_ROWS, (int64) rows->n);
		cpht_reserved_add(&rows->reserved, sizeof(cpht_key_index) * rows->n, "cpht_insert_new sort");
		if (cpht_sort_key_index(rows->rows, rows->n) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Sorting the %llu new rows failed.", (unsigned long long) rows->n)));
		cpht_reserved_sub(&rows->reserved, sizeof(cpht_key_index) * rows->n);
		chunk = rows->key_order ? key_order_chunk(source, rows->seen) : TID_CHUNK;

		array = palloc0(ARR_OVERHEAD_NONULLS(1) + sizeof(ItemPointerData) * Min(rows->n, chunk));
		array->ndim = 1;
		array->dataoffset = 0;
		array->elemtype = TIDOID;
		ARR_LBOUND(array)[0] = 1;
		cpht_progress_phase(CPHT_PHASE_INSERTING_ROWS, (int64) rows->n);
		for (uint64 done = 0; done < rows->n; done += chunk)
		{
			int			n = (int) Min(rows->n - done, chunk);
			ItemPointer tids = (ItemPointer) ARR_DATA_PTR(array);

			CHECK_FOR_INTERRUPTS();
			SET_VARSIZE(array, ARR_OVERHEAD_NONULLS(1) + sizeof(ItemPointerData) * n);
			ARR_DIMS(array)[0] = n;
			for (int i = 0; i < n; i++)
				cpht_relscan_set_tid(&tids[i], rows->rows[done + i].index);
			/* the node reads at the scan's command id, not at the INSERT's:
			 * what a trigger or an earlier part of the calling statement
			 * changed in source takes no row away */
			cpht_rows_by_tid_read_under(snapshot);
			inserted += run_insert(plan, PointerGetDatum(array), snapshot);
			cpht_progress_rows(n);
		}
		MemoryContextDelete(rows_cxt);
	}
	PG_FINALLY();
	{
		cpht_rows_by_tid_read_under(InvalidSnapshot);
		cpht_rows_by_tid_plan_for(prev_plan_for);
	}
	PG_END_TRY();
	UnregisterSnapshot(snapshot);
	return inserted;
}

/* Any other source: INSERT ... SELECT * FROM cpht_fop_rows(...). */
static uint64
insert_by_fop_rows(int32 handle, Relation source, const char *key_column, Oid target,
				   Oid fn_oid)
{
	char	   *source_name = qualified_name(RelationGetRelid(source));
	char	   *sql = psprintf("INSERT INTO %s SELECT * FROM %s.cpht_fop_rows($1, NULL::%s, "
							   "%s::pg_catalog.text, %s::pg_catalog.text)",
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
	bool		began;

	source = relation_open(source_id, AccessShareLock);
	attno = cpht_relscan_key_column(source, key_column, true, &typlen);
	/* cpht_stat_progress: keys sent of the rows the planner expects, then
	 * (the fast path) sorting and inserting the new rows */
	began = cpht_progress_begin(CPHT_PROGRESS_INSERT_NEW, handle, source);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (cpht_relscan_reads_all(source))
		inserted = insert_by_tids(handle, source, attno, target);
	else
		inserted = insert_by_fop_rows(handle, source, key_column, target,
									  fcinfo->flinfo->fn_oid);
	SPI_finish();
	cpht_progress_end(began);
	relation_close(source, AccessShareLock);
	PG_RETURN_INT64((int64) inserted);
}
