/*
 * table/kind_policy.h — the rules of each table kind's layout, one policy
 * per kind (kind_policy.c): how many levels and hash choices it has, how
 * it is sized and when and how it grows, how a shard's levels are cut,
 * and what undoing a call may do.  The table layer reads them instead of
 * testing the kind; the policy is picked once, when a table's layout is
 * resolved (table_resolve_layout: at creation, and for the new layout of a
 * growth or widening, which keeps the kind), and kept in struct
 * cpht_table (t->kind_policy).  Functions that take parameters rather than
 * a table look it up by params.kind (cpht_kind_policy_of).
 *
 * Rules only: the code that runs a kind's operations is the device's (the
 * CPU's cpu_kinds in cpu/cpu_batches.c, the GPU's gpu_kinds in
 * gpu/gpu_pipeline.cu), indexed by the kind.
 *
 * Who: table/, and shards/, cpu/ and gpu/ (test/check-layout.sh; also
 * through table/device_ops.h); never src/.
 *
 * Concurrency: the policies are constant data (a static const array) and
 * their functions touch only their arguments (make_levels fills the
 * parameters it is given, grow_fill reads the table's layout): safe on any
 * thread, under a table's own one-thread-at-a-time rule.  Nothing here
 * allocates or fails;
 * cpht_kind_policy_of answers NULL for a kind cpht does not know.
 */
#ifndef CPHT_KIND_POLICY_H
#define CPHT_KIND_POLICY_H

#include "cpht_table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cpht_kind_policy
{
	cpht_kind	kind;
	int			levels;			/* iceberg 2, cuckoo 1 */
	/* buckets a key may take in level l (layout.h's choice bits follow):
	 * iceberg 1 primary and 2 secondary, cuckoo 3 */
	int			choices[CPHT_MAX_LEVELS];

	/*
	 * Sizing (table_sizing.c).  A table for `capacity` keys gets
	 * capacity / (slots_per_bucket * target_fill) primary buckets, rounded
	 * up: slots_per_bucket counts the slots of every level per primary
	 * bucket, target_fill is the fill the kind reaches with margin on
	 * random keys.
	 */
	double		slots_per_bucket;
	double		target_fill;
	/* Set p's levels (slots, bucket_slots) for about `primary` primary
	 * buckets, slot widths left as they are. */
	void		(*make_levels) (cpht_params *p, double primary);
	/* Whether p's levels are such as make_levels makes: a growth then
	 * sizes the new layout by make_levels again (table_size_levels),
	 * else it scales each level as it is. */
	int			(*made_levels) (const cpht_params *p);
	/* Added to the scaled bucket count before make_levels on growth
	 * (cuckoo 1: its make_levels truncates a fractional count, which the
	 * extra bucket makes up for; the iceberg's rounds up itself). */
	double		grow_extra_buckets;

	/* Fill (keys in buckets over slots) past which a find-or-put grows the
	 * table before it runs (table_grow.c). */
	double		(*grow_fill) (const cpht_table *t);

	/* A shard's level l (shards/shards.c): its share of the buckets,
	 * raised to at least shard_min_buckets[l] and up to a multiple of
	 * shard_bucket_multiple[l], as make_levels keeps it. */
	uint64_t	shard_min_buckets[CPHT_MAX_LEVELS];
	uint64_t	shard_bucket_multiple[CPHT_MAX_LEVELS];

	/*
	 * Undo (table_rollback.c).  undo_to_empty: the keys the latest call
	 * put took slots that were EMPTY before it and nothing moved since,
	 * so undoing it may write EMPTY instead of tombstones and leave the
	 * table bit for bit as before (iceberg: a key never moves once put).
	 * evicts: a put may move other keys (cuckoo eviction chains), so a
	 * find-or-put may leave keys without a slot (homeless, with room for
	 * one per key of the chunk given by the caller), the undo of a failed
	 * call puts those back, and keys no chain places go to the stash.
	 */
	int			undo_to_empty;
	int			evicts;
} cpht_kind_policy;

/* The policy of `kind`, or NULL for no kind cpht knows. */
const cpht_kind_policy *cpht_kind_policy_of(cpht_kind kind);

/*
 * The levels of an iceberg table with about `primary` primary buckets
 * (the iceberg's make_levels; secondary buckets of 16 slots from
 * ICEBERG_WIDE_FROM primary buckets on, else 8).
 */
#define ICEBERG_WIDE_FROM 64
void		table_iceberg_levels(cpht_params *p, double primary);

#ifdef __cplusplus
}
#endif

#endif							/* CPHT_KIND_POLICY_H */
