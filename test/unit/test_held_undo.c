/*
 * test_held_undo.c — undo kept outside the table (cpht_table_log_read,
 * cpht_table_hold_deletes, cpht_table_undo), as the cpht worker keeps it for
 * transactional shared tables: several transactions change one table at
 * once, on disjoint keys, and each commits (its entries are forgotten) or
 * aborts (its entries alone are undone, newest first) in any order.
 *
 * A random property on both kinds: after every step the table holds
 * exactly the reference's keys; the cuckoo table is filled so that its
 * evictions run often, which would take a pending delete's tombstone if it
 * were not kept; the pool outgrows the table, so it grows while deletes
 * are held.  Also: rebuild is refused while deletes are held.
 */
#include <string.h>

#include "cpht_table.h"
#include "reference_set.h"
#include "table/device_ops.h"
#include "unit.h"

#define POOL 40000
#define TXNS 4
#define STEPS 2000

static cpht_device device = CPHT_DEVICE_CPU;

/* One open transaction's undo: its entries in order. */
typedef struct txn
{
	int			open;
	uint64_t   *keys;
	uint8_t    *where;
	size_t		n;
	size_t		cap;
	size_t		deletes;
} txn;

static int	owner[POOL];		/* 1 + txn owning pool key i, 0 when none */

static void
txn_append(txn *x, const uint64_t *keys, const uint8_t *where, size_t n)
{
	if (x->n + n > x->cap)
	{
		x->cap = (x->n + n) * 2;
		x->keys = realloc(x->keys, x->cap * sizeof(uint64_t));
		x->where = realloc(x->where, x->cap);
	}
	memcpy(x->keys + x->n, keys, n * sizeof(uint64_t));
	memcpy(x->where + x->n, where, n);
	for (size_t i = 0; i < n; i++)
		x->deletes += where[i] != 0;
	x->n += n;
}

static int
same_keys(cpht_table *t, const ref_set *ref, const uint64_t *pool)
{
	uint8_t    *found = malloc(POOL);
	size_t		wrong = 0;

	cpht_table_find(t, pool, POOL, found);
	for (size_t i = 0; i < POOL; i++)
		wrong += found[i] != ref_has(ref, pool[i]);
	free(found);
	return wrong == 0 && cpht_table_count(t) == ref->count;
}

/* Ends transaction x: an abort undoes its entries, both forget them. */
static void
txn_end(cpht_table *t, txn *x, int xi, int abort, ref_set *ref, const uint64_t *pool)
{
	if (abort)
	{
		cpht_stats	before,
					after;
		uint64_t	from_stash = 0;

		for (size_t i = 0; i < x->n; i++)
			from_stash += x->where[i] == CPHT_WHERE_STASH;
		cpht_table_stats(t, &before);
		CHECK(cpht_table_undo(t, x->keys, x->where, x->n) == CPHT_OK, "undo: %s", cpht_table_error(t));

		/*
		 * Each deleted key found its own tombstone again (none was taken
		 * meanwhile): only keys deleted from the stash went back there.
		 */
		cpht_table_stats(t, &after);
		CHECK(after.stashed <= before.stashed + from_stash,
			  "an undo stashed %llu deleted keys whose tombstones were taken",
			  (unsigned long long) (after.stashed - before.stashed - from_stash));
		for (size_t i = x->n; i-- > 0;)
		{
			if (x->where[i] != 0)
				ref_add(ref, x->keys[i]);
			else
				ref_del(ref, x->keys[i]);
		}
	}
	cpht_table_hold_deletes(t, -(int64_t) x->deletes);
	for (size_t i = 0; i < POOL; i++)
		if (owner[i] == xi + 1)
			owner[i] = 0;
	x->n = 0;
	x->deletes = 0;
	x->open = 0;
	(void) pool;
}

static void
check_kind(cpht_kind kind)
{
	cpht_params p;
	cpht_table *t;
	char		err[256];
	uint64_t   *pool = malloc(POOL * sizeof(uint64_t));
	uint64_t   *batch = malloc(POOL * sizeof(uint64_t));
	size_t	   *batch_at = malloc(POOL * sizeof(size_t));
	uint8_t    *status = malloc(POOL);
	uint64_t   *logged = malloc(POOL * sizeof(uint64_t));
	uint8_t    *where = malloc(POOL);
	txn			x[TXNS];
	ref_set		ref;
	uint64_t	seed = 0x5eed0000 + kind;
	int			wrong_steps = 0;
	int			aborts = 0,
				refused = 0;

	memset(x, 0, sizeof(x));
	memset(owner, 0, sizeof(owner));
	for (size_t i = 0; i < POOL; i++)
		pool[i] = unit_rand(&seed);
	/* a table the pool fills to about 80 %: cuckoo evictions run often */
	CHECK(cpht_params_for_capacity(kind, POOL * 3 / 4, 64, &p, err, sizeof(err)) == CPHT_OK, "%s", err);
	p.device = device;
	p.seed = 42;
	CHECK(cpht_table_create(&p, &t, err, sizeof(err)) == CPHT_OK, "%s", err);
	cpht_table_set_logging(t, 1);
	ref_init(&ref, POOL);

	for (int step = 0; step < STEPS; step++)
	{
		int			xi = (int) (unit_rand(&seed) % TXNS);
		txn		   *tx = &x[xi];
		unsigned	what = (unsigned) (unit_rand(&seed) % 10);
		size_t		n = 0;
		uint64_t	pos;
		cpht_status rc;

		if (tx->open && what == 0)
		{
			aborts++;
			txn_end(t, tx, xi, 1, &ref, pool);
		}
		else if (tx->open && what == 1)
			txn_end(t, tx, xi, 0, &ref, pool);
		else
		{
			size_t		want = 1 + unit_rand(&seed) % 400;
			int			erase = what >= 7;

			tx->open = 1;
			/* keys owned by another open transaction are left out, as the
			 * worker's conflict check leaves them out */
			for (size_t k = 0; k < want; k++)
			{
				size_t		i = unit_rand(&seed) % POOL;

				if (owner[i] != 0 && owner[i] != xi + 1)
					continue;
				batch_at[n] = i;
				batch[n++] = pool[i];
			}
			pos = cpht_table_log_position(t);
			if (erase)
				rc = cpht_table_erase(t, batch, n, status);
			else
				rc = cpht_table_find_or_put(t, batch, n, status);
			if (rc == CPHT_ERR_FULL)
				continue;		/* undone whole: nothing changed */
			CHECK(rc == CPHT_OK, "step %d: %s", step, cpht_table_error(t));
			for (size_t k = 0; k < n; k++)
			{
				if (erase && status[k])
					ref_del(&ref, batch[k]);
				else if (!erase && status[k] == CPHT_PUT)
					ref_add(&ref, batch[k]);
				if ((erase && status[k]) || (!erase && status[k] == CPHT_PUT))
					owner[batch_at[k]] = xi + 1;
			}
			{
				uint64_t	m = cpht_table_log_position(t) - pos;
				size_t		deletes = 0;

				CHECK(cpht_table_log_read(t, pos, m, logged, where) == CPHT_OK, "%s", cpht_table_error(t));
				for (size_t k = 0; k < m; k++)
				{
					deletes += where[k] != 0;
					CHECK((where[k] != 0) == erase, "entry %zu of a%s call has where %u", k,
						  erase ? "n erase" : " find-or-put", where[k]);
				}
				txn_append(tx, logged, where, m);
				cpht_table_hold_deletes(t, (int64_t) deletes);
				cpht_table_truncate_log(t, pos);
			}
		}
		if (step % 50 == 0)
		{
			int			held = 0;

			for (int k = 0; k < TXNS; k++)
				held += x[k].deletes > 0;
			if (held)
			{
				CHECK(cpht_table_rebuild(t) != CPHT_OK, "rebuild ran while deletes were held");
				refused++;
			}
			else
				CHECK(cpht_table_rebuild(t) == CPHT_OK, "rebuild: %s", cpht_table_error(t));
		}
		if (!same_keys(t, &ref, pool))
			wrong_steps++;
	}
	for (int k = 0; k < TXNS; k++)
		if (x[k].open)
			txn_end(t, &x[k], k, k % 2, &ref, pool);
	CHECK(same_keys(t, &ref, pool), "%s: table differs from the reference at the end", kind == CPHT_ICEBERG ? "iceberg" : "cuckoo");
	CHECK(wrong_steps == 0, "%s: %d of %d steps left the table unlike the reference",
		  kind == CPHT_ICEBERG ? "iceberg" : "cuckoo", wrong_steps, STEPS);
	CHECK(aborts > 100 && refused > 0, "the property ran %d aborts and %d refused rebuilds", aborts, refused);
	{
		cpht_stats	st;

		/* the pool outgrows the table: growths happen while deletes are
		 * held, and their undo must not look for the old places */
		cpht_table_stats(t, &st);
		CHECK(st.grows > 0, "the table never grew");
	}
	CHECK(cpht_table_rebuild(t) == CPHT_OK, "rebuild after every transaction ended: %s", cpht_table_error(t));
	CHECK(same_keys(t, &ref, pool), "rebuild changed the keys");

	for (int k = 0; k < TXNS; k++)
	{
		free(x[k].keys);
		free(x[k].where);
	}
	cpht_table_destroy(t);
	ref_free(&ref);
	free(pool);
	free(batch);
	free(batch_at);
	free(status);
	free(logged);
	free(where);
}

int
main(void)
{
	char		why[256];

	check_kind(CPHT_ICEBERG);
	check_kind(CPHT_CUCKOO);
	if (cpht_gpu_usable(why, sizeof(why)))
	{
		device = CPHT_DEVICE_GPU;
		check_kind(CPHT_ICEBERG);
		check_kind(CPHT_CUCKOO);
		printf("test_held_undo: CPU and GPU\n");
	}
	else
		printf("test_held_undo: GPU part SKIPPED: %s\n", why);
	UNIT_DONE();
}
