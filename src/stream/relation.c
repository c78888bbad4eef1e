/*
 * relation.c — which relation and which column a feed reads, and by which
 * route: the key column and its type, the caller's right to read it,
 * whether our own parallel heap scan reads exactly what a query would
 * (heap_feed.c) or the relation is read by a query (query_feed.c), and how
 * many workers the heap scan gets.
 *
 * Nothing here locks: the caller holds the relation open (AccessShareLock
 * at least) while it asks.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "optimizer/cost.h"
#include "optimizer/paths.h"
#include "parser/parse_relation.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "stream/stream.h"

/*
 * The key column of rel: 42703 when there is none, 42804 when it is not
 * bigint, integer or smallint (or a domain over one); its length in *typlen.
 */
AttrNumber
cpht_relscan_key_column(Relation rel, const char *key_column, bool bigint_only,
						int16 *typlen)
{
	AttrNumber	attno = attnameAttNum(rel, key_column, false);
	Oid			type;

	if (attno <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						key_column, RelationGetRelationName(rel))));
	type = getBaseType(TupleDescAttr(RelationGetDescr(rel), attno - 1)->atttypid);
	if (bigint_only && type != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("key column \"%s\" of relation \"%s\" is of type %s",
						key_column, RelationGetRelationName(rel), format_type_be(type)),
				 errdetail("The rows' keys are read from a column of type bigint, as cpht_fop_rows reads them.")));
	switch (type)
	{
		case INT8OID:
			*typlen = 8;
			break;
		case INT4OID:
			*typlen = 4;
			break;
		case INT2OID:
			*typlen = 2;
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("key column \"%s\" of relation \"%s\" is of type %s",
							key_column, RelationGetRelationName(rel), format_type_be(type)),
					 errdetail("Keys are read from a column of type bigint, integer or smallint."),
					 errhint("Run cpht_fop_agg over an expression that gives bigint instead.")));
	}
	return attno;
}

/* 42501 unless the role may read the column (by the table's or the
 * column's SELECT privilege). */
void
cpht_relscan_check_select(Relation rel, AttrNumber attno)
{
	Oid			relid = RelationGetRelid(rel);
	Oid			role = GetUserId();

	if (pg_class_aclcheck(relid, role, ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck(relid, attno, role, ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(rel->rd_rel->relkind),
					   RelationGetRelationName(rel));
}

/*
 * Whether our own scan reads exactly what SELECT * FROM rel would: a plain
 * heap table, no children to expand, no policy to apply.
 */
bool
cpht_relscan_reads_all(Relation rel)
{
	return rel->rd_rel->relkind == RELKIND_RELATION &&
		rel->rd_rel->relam == HEAP_TABLE_AM_OID &&
		!rel->rd_rel->relhassubclass &&
		/* RLS_NONE_ENV: policies exist, but none applies to this role now */
		check_enable_rls(RelationGetRelid(rel), InvalidOid, true) != RLS_ENABLED;
}

/*
 * Workers for a scan of rel, as the planner counts them for a sequential
 * scan (compute_parallel_worker): the parallel_workers storage parameter,
 * or one more worker each time the heap is three times larger than
 * min_parallel_table_scan_size, at most max_parallel_workers_per_gather.
 * None in a parallel operation already, or for a temporary table, whose
 * pages live in this backend.
 */
int
cpht_relscan_workers(Relation rel)
{
	int			workers;

	if (IsInParallelMode() || IsParallelWorker() || !IsUnderPostmaster ||
		max_parallel_workers_per_gather <= 0 || RelationUsesLocalBuffers(rel))
		return 0;
	workers = RelationGetParallelWorkers(rel, -1);
	if (workers < 0)
	{
		BlockNumber pages = RelationGetNumberOfBlocks(rel);
		int			threshold = Max(min_parallel_table_scan_size, 1);

		if (pages < (BlockNumber) min_parallel_table_scan_size)
			return 0;
		workers = 1;
		while (pages >= (BlockNumber) threshold * 3)
		{
			workers++;
			threshold *= 3;
			if (threshold > INT_MAX / 3)
				break;
		}
	}
	return Min(workers, max_parallel_workers_per_gather);
}
