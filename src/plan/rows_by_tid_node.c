/*
 * rows_by_tid_node.c — Custom Scan "cpht rows by tid": the rows of a list of
 * tids, returned in the list's order.
 *
 * cpht_insert_new inserts its new rows with
 *     INSERT INTO target SELECT * FROM ONLY source
 *     WHERE ctid OPERATOR(pg_catalog.=) ANY ($1)
 * and, into a target with a B-tree index led by the key, wants them in key
 * order: the index then fills leaf by leaf instead of at a random leaf per
 * row.  A TID scan returns rows in heap order, so the statement would need
 * a Sort of every new row over it (PostgreSQL's tuplesort: on 1.1M rows of
 * (bigint, int) a third of the time the insert itself took, and a sort to
 * disk beyond work_mem).  cpht_insert_new knows each row's key already: it
 * sorts the tids by key (a radix sort) and passes them in that order, and
 * while it plans the statement (cpht_rows_by_tid_plan_for) the planner hook
 * here puts this node where the TID scan would be.
 *
 * The node reads the heap in page order all the same: when the tids are
 * not ascending, it sorts them with their positions, fetches each row once
 * in heap order into memory (counted against cpht.max_memory), and then
 * returns the rows by position.  Tids in heap order are fetched and
 * returned one by one, as a TID scan does.  Like a TID scan it returns
 * each tid's row once, under the query's snapshot (or the one
 * cpht_rows_by_tid_read_under left for it), and skips a tid whose row is
 * not visible or does not exist.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/tableam.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type_d.h"
#include "executor/executor.h"
#include "executor/nodeCustom.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/restrictinfo.h"
#include "storage/bufmgr.h"
#include "utils/array.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "cpht_table.h"
#include "memcap.h"
#include "stream/stream.h"
#include "plan/plan.h"

#define NODE_NAME "cpht rows by tid"

static Oid	plan_for_relid = InvalidOid;
static Snapshot next_snapshot = InvalidSnapshot;

static set_rel_pathlist_hook_type prev_set_rel_pathlist = NULL;

static CustomPathMethods rows_path_methods;
static CustomScanMethods rows_scan_methods;
static CustomExecMethods rows_exec_methods;

/* Fetched rows' tuples are copied into blocks of this size (a tuple
 * never spans two: it fits a page).  Blocks are never moved, so growing
 * costs no copy, and only what the rows take is touched. */
#define ARENA_BLOCK ((Size) 4 << 20)

/* Rows ahead whose memory is prefetched: a chunk's rows lie at random
 * places of the arena and of the per-position array. */
#define PREFETCH_AHEAD 16

/* A fetched row: its tuple's bytes (NULL: no row). */
typedef struct FetchedRow
{
	char	   *data;
	uint32		len;
} FetchedRow;

typedef struct RowsByTidState
{
	CustomScanState css;
	ExprState  *tids_expr;
	bool		started;
	/* the tids, in the order the rows are returned */
	ItemPointerData *tids;
	int			ntids;
	int			next;
	Snapshot	snapshot;		/* the rows' */
	BlockNumber nblocks;		/* of the relation when the node started */
	TupleTableSlot *fetch_slot;
	/* tids not in heap order: the rows fetched up front, by position */
	bool		fetched;
	FetchedRow *rows;
	char	   *block;			/* the arena's last block */
	Size		block_used;
	MemoryContext cxt;			/* the tids, rows and arena */
	CphtReserved reserved;		/* what cxt holds, against cpht.max_memory */
} RowsByTidState;

Oid
cpht_rows_by_tid_plan_for(Oid relid)
{
	Oid			prev = plan_for_relid;

	plan_for_relid = relid;
	return prev;
}

Snapshot
cpht_rows_by_tid_read_under(Snapshot snapshot)
{
	Snapshot	prev = next_snapshot;

	next_snapshot = snapshot;
	return prev;
}

/* Whether root plans a top-level INSERT, as cpht_insert_new's is (into
 * target, or what a rule or an updatable view makes of it). */
static bool
planning_an_insert(PlannerInfo *root)
{
	return root->query_level == 1 && root->parse->commandType == CMD_INSERT;
}

/* ---- planning ------------------------------------------------------------ */

/* The ScalarArrayOpExpr of  ctid = ANY ($1)  on relation rti, or NULL.  The
 * operator is pg_catalog's tid = (TIDEqualOperator), matched by its OID:
 * cpht_insert_new's statement names it as OPERATOR(pg_catalog.=), and an
 * = of another schema is no match. */
static ScalarArrayOpExpr *
tid_list_clause(Expr *clause, Index rti)
{
	ScalarArrayOpExpr *saop = (ScalarArrayOpExpr *) clause;
	Var		   *var;
	Param	   *param;

	if (!IsA(saop, ScalarArrayOpExpr) || !saop->useOr || saop->opno != TIDEqualOperator ||
		list_length(saop->args) != 2)
		return NULL;
	var = linitial(saop->args);
	param = lsecond(saop->args);
	if (!IsA(var, Var) || var->varno != rti || var->varlevelsup != 0 ||
		var->varattno != SelfItemPointerAttributeNumber)
		return NULL;
	if (!IsA(param, Param) || param->paramkind != PARAM_EXTERN || param->paramid != 1 ||
		param->paramtype != TIDARRAYOID)
		return NULL;
	return saop;
}

static void
rows_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	CustomPath *cp;

	if (prev_set_rel_pathlist)
		prev_set_rel_pathlist(root, rel, rti, rte);

	if (!OidIsValid(plan_for_relid) || rel->reloptkind != RELOPT_BASEREL ||
		rte->rtekind != RTE_RELATION || rte->relid != plan_for_relid || rte->inh ||
		!planning_an_insert(root) ||
		list_length(rel->baserestrictinfo) != 1 ||
		tid_list_clause(((RestrictInfo *) linitial(rel->baserestrictinfo))->clause, rti) == NULL)
		return;

	/* the node is the scan: a TID scan would lose the tids' order */
	cp = makeNode(CustomPath);
	cp->path.pathtype = T_CustomScan;
	cp->path.parent = rel;
	cp->path.pathtarget = rel->reltarget;
	cp->path.param_info = NULL;
	cp->path.parallel_aware = false;
	cp->path.parallel_safe = false;
	cp->path.parallel_workers = 0;
	cp->path.rows = rel->rows;
	/* a TID scan's cost: a page and a tuple per tid */
	cp->path.startup_cost = 0;
	cp->path.total_cost = rel->rows * (random_page_cost + cpu_tuple_cost);
	cp->path.pathkeys = NIL;
	cp->flags = CUSTOMPATH_SUPPORT_PROJECTION;
	cp->custom_paths = NIL;
	cp->custom_private = NIL;
	cp->methods = &rows_path_methods;
	rel->pathlist = NIL;
	rel->partial_pathlist = NIL;
	add_path(rel, &cp->path);
}

static Plan *
rows_plan(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
		  List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cs = makeNode(CustomScan);
	ScalarArrayOpExpr *saop = NULL;
	List	   *rest = NIL;
	ListCell   *lc;

	foreach(lc, clauses)
	{
		RestrictInfo *ri = lfirst(lc);
		ScalarArrayOpExpr *s = saop ? NULL : tid_list_clause(ri->clause, rel->relid);

		if (s)
			saop = s;
		else
			rest = lappend(rest, ri);
	}
	if (saop == NULL)
		elog(ERROR, "cpht rows by tid: no tid list in the scan's conditions");

	cs->scan.plan.targetlist = tlist;
	cs->scan.plan.qual = extract_actual_clauses(rest, false);
	cs->scan.scanrelid = rel->relid;
	cs->custom_scan_tlist = NIL;
	cs->custom_relids = bms_copy(rel->relids);
	cs->flags = best_path->flags;
	cs->custom_plans = NIL;
	cs->custom_exprs = list_make1(copyObject(lsecond(saop->args)));
	cs->custom_private = NIL;
	cs->methods = &rows_scan_methods;
	return &cs->scan.plan;
}

/* ---- execution ----------------------------------------------------------- */

static Node *
rows_create_state(CustomScan *cs)
{
	RowsByTidState *rs = (RowsByTidState *) newNode(sizeof(RowsByTidState), T_CustomScanState);

	rs->css.methods = &rows_exec_methods;
	return (Node *) rs;
}

static void
reserve(RowsByTidState *rs, uint64 bytes)
{
	cpht_reserved_add(&rs->reserved, bytes, "cpht_insert_new row buffer");
}

static void
rows_begin(CustomScanState *node, EState *estate, int eflags)
{
	RowsByTidState *rs = (RowsByTidState *) node;
	CustomScan *cs = (CustomScan *) node->ss.ps.plan;

	rs->tids_expr = ExecInitExpr(linitial(cs->custom_exprs), &node->ss.ps);
	rs->fetch_slot = table_slot_create(node->ss.ss_currentRelation, &estate->es_tupleTable);
	/* the snapshot a caller left for this node, or the statement's (the
	 * INSERT's node starts as its plan is set up, before any of the
	 * INSERT's triggers can run a statement, so it is the one to take it) */
	rs->snapshot = next_snapshot != InvalidSnapshot ? next_snapshot : estate->es_snapshot;
	next_snapshot = InvalidSnapshot;
	rs->cxt = AllocSetContextCreate(CurrentMemoryContext, "cpht rows by tid",
									ALLOCSET_DEFAULT_SIZES);
	/* what is counted goes back however the query ends */
	cpht_reserved_init(&rs->reserved, rs->cxt);
}

/* Forgets the tids and rows of a run. */
static void
rows_reset(RowsByTidState *rs)
{
	MemoryContextReset(rs->cxt);
	/* the reset gave the bytes back and dropped the callback */
	cpht_reserved_init(&rs->reserved, rs->cxt);
	rs->started = false;
	rs->fetched = false;
	rs->tids = NULL;
	rs->ntids = 0;
	rs->next = 0;
	rs->rows = NULL;
	rs->block = NULL;
	rs->block_used = 0;
}

/* The tid list, from the parameter (NULL elements skipped). */
static void
read_tids(RowsByTidState *rs)
{
	ExprContext *econtext = rs->css.ss.ps.ps_ExprContext;
	bool		isnull;
	Datum		d = ExecEvalExprSwitchContext(rs->tids_expr, econtext, &isnull);
	ArrayType  *array;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	MemoryContext old;

	if (isnull)
		return;
	old = MemoryContextSwitchTo(rs->cxt);
	array = DatumGetArrayTypeP(d);
	deconstruct_array(array, TIDOID, sizeof(ItemPointerData), false, TYPALIGN_SHORT,
					  &elems, &nulls, &n);
	rs->tids = palloc_extended(sizeof(ItemPointerData) * Max(n, 1), MCXT_ALLOC_HUGE);
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			rs->tids[rs->ntids++] = *(ItemPointer) DatumGetPointer(elems[i]);
	pfree(elems);
	pfree(nulls);
	MemoryContextSwitchTo(old);
}

static bool
tids_ascending(RowsByTidState *rs)
{
	for (int i = 1; i < rs->ntids; i++)
		if (ItemPointerCompare(&rs->tids[i - 1], &rs->tids[i]) >= 0)
			return false;
	return true;
}

/* The row of tid into slot, if it exists and the snapshot sees it. */
static bool
fetch_row(RowsByTidState *rs, ItemPointer tid)
{
	Relation	rel = rs->css.ss.ss_currentRelation;

	if (!ItemPointerIsValid(tid) || ItemPointerGetBlockNumber(tid) >= rs->nblocks)
		return false;
	return table_tuple_fetch_row_version(rel, tid, rs->snapshot, rs->fetch_slot);
}

/* Room for a tuple of len bytes in the arena. */
static char *
arena_take(RowsByTidState *rs, uint32 len)
{
	char	   *p;

	if (rs->block == NULL || rs->block_used + MAXALIGN(len) > ARENA_BLOCK)
	{
		reserve(rs, ARENA_BLOCK);
		rs->block = MemoryContextAllocHuge(rs->cxt, ARENA_BLOCK);
		rs->block_used = 0;
	}
	p = rs->block + rs->block_used;
	rs->block_used += MAXALIGN(len);
	return p;
}

/*
 * Tids out of heap order: fetches every row once, page by page, and keeps
 * its tuple for its position.
 */
static void
fetch_all(RowsByTidState *rs)
{
	int			n = rs->ntids;
	cpht_key_index *order;
	MemoryContext old = MemoryContextSwitchTo(rs->cxt);

	/* the positions sorted by tid, the sort's own buffer, the rows */
	reserve(rs, (uint64) n * (2 * sizeof(cpht_key_index) + sizeof(FetchedRow)));
	order = palloc_extended(sizeof(cpht_key_index) * n, MCXT_ALLOC_HUGE);
	for (int i = 0; i < n; i++)
	{
		order[i].key = cpht_relscan_tid(&rs->tids[i]);
		order[i].index = (uint64) i;
	}
	if (cpht_sort_key_index(order, n) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Sorting %d row positions failed.", n)));
	rs->rows = palloc_extended(sizeof(FetchedRow) * n, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);

	for (int i = 0; i < n; i++)
	{
		FetchedRow *row = &rs->rows[order[i].index];
		ItemPointerData tid;
		HeapTuple	tuple;

		if ((i & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		if (i + PREFETCH_AHEAD < n)
			__builtin_prefetch(&rs->rows[order[i + PREFETCH_AHEAD].index], 1);
		/* a tid listed twice gives its row once, at its first position */
		if (i > 0 && order[i].key == order[i - 1].key)
			continue;
		cpht_relscan_set_tid(&tid, order[i].key);
		if (!fetch_row(rs, &tid))
			continue;
		tuple = ExecFetchSlotHeapTuple(rs->fetch_slot, false, NULL);
		row->data = arena_take(rs, tuple->t_len);
		row->len = tuple->t_len;
		memcpy(row->data, tuple->t_data, tuple->t_len);
	}
	ExecClearTuple(rs->fetch_slot);
	pfree(order);
	MemoryContextSwitchTo(old);
}

static TupleTableSlot *
rows_next(ScanState *ss)
{
	RowsByTidState *rs = (RowsByTidState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;
	Relation	rel = ss->ss_currentRelation;

	if (!rs->started)
	{
		rs->started = true;
		rs->nblocks = RelationGetNumberOfBlocks(rel);
		read_tids(rs);
		if (!tids_ascending(rs))
		{
			fetch_all(rs);
			rs->fetched = true;
		}
	}
	while (rs->next < rs->ntids)
	{
		int			pos = rs->next++;

		if (rs->fetched)
		{
			HeapTupleData tuple;

			if (pos + PREFETCH_AHEAD < rs->ntids && rs->rows[pos + PREFETCH_AHEAD].data)
				__builtin_prefetch(rs->rows[pos + PREFETCH_AHEAD].data);
			if (rs->rows[pos].data == NULL)
				continue;
			tuple.t_len = rs->rows[pos].len;
			tuple.t_self = rs->tids[pos];
			tuple.t_tableOid = RelationGetRelid(rel);
			tuple.t_data = (HeapTupleHeader) rs->rows[pos].data;
			/* into the scan slot, a buffer heap tuple slot: it keeps a copy */
			ExecForceStoreHeapTuple(&tuple, slot, false);
		}
		else
		{
			if (!fetch_row(rs, &rs->tids[pos]))
				continue;
			/* the fetch slot keeps the buffer pinned until the next fetch */
			ExecForceStoreHeapTuple(ExecFetchSlotHeapTuple(rs->fetch_slot, false, NULL),
									slot, false);
		}
		slot->tts_tid = rs->tids[pos];
		slot->tts_tableOid = RelationGetRelid(rel);
		return slot;
	}
	return ExecClearTuple(slot);
}

static bool
rows_recheck(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
rows_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, rows_next, rows_recheck);
}

static void
rows_end(CustomScanState *node)
{
	RowsByTidState *rs = (RowsByTidState *) node;

	ExecClearTuple(rs->fetch_slot);
	MemoryContextDelete(rs->cxt);
}

static void
rows_rescan(CustomScanState *node)
{
	RowsByTidState *rs = (RowsByTidState *) node;

	ExecClearTuple(rs->fetch_slot);
	rows_reset(rs);
	ExecScanReScan(&node->ss);
}

void
cpht_rows_by_tid_init(void)
{
	rows_path_methods.CustomName = NODE_NAME;
	rows_path_methods.PlanCustomPath = rows_plan;

	rows_scan_methods.CustomName = NODE_NAME;
	rows_scan_methods.CreateCustomScanState = rows_create_state;
	RegisterCustomScanMethods(&rows_scan_methods);

	rows_exec_methods.CustomName = NODE_NAME;
	rows_exec_methods.BeginCustomScan = rows_begin;
	rows_exec_methods.ExecCustomScan = rows_exec;
	rows_exec_methods.EndCustomScan = rows_end;
	rows_exec_methods.ReScanCustomScan = rows_rescan;

	prev_set_rel_pathlist = set_rel_pathlist_hook;
	set_rel_pathlist_hook = rows_pathlist;
}
