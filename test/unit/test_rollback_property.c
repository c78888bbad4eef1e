/*
 * test_rollback_property.c — rollbacks never lose a committed key.
 *
 * A property test, on the CPU and (where one is usable) on the GPU, for
 * both kinds and several key widths, on tables of a fixed size and on
 * tables that grow.  A fixed-size round fills the table until it refuses
 * keys (the committed state); a growing round starts from a small table
 * and commits enough keys to grow it twice, and its inserts inside the
 * transaction are large enough to grow it again there.  Then a transaction
 * runs: deletes of random fractions (10 keys up to all of them), inserts
 * (that may find a fixed-size table full), savepoints, rebuilds, and
 * rollbacks to savepoints and to the transaction's start, as ROLLBACK TO
 * SAVEPOINT, exception blocks and ROLLBACK do.  After every step the table must hold exactly the reference
 * set: every key of it found, no other key of the round found, the count
 * exact; a rollback must never fail.
 *
 * CPHT_PROPERTY_ROUNDS sets the rounds per configuration (default 3, a few
 * seconds on two cores); CPHT_PROPERTY_SEED the first seed.
 */
#include <string.h>

#include "cpht_table.h"
#include "unit.h"

#define UNIVERSE_FACTOR 3
#define GROWING_UNIVERSE_FACTOR 8	/* a growing round: keys per initial slot */

/* Growths that happened inside transactions, over all growing rounds. */
static uint64_t grows_in_transactions = 0;
#define CAPACITY 1000
#define MAX_SAVEPOINTS 8
#define STEPS 12

typedef struct round_state
{
	cpht_table *t;
	uint64_t   *u;				/* the round's keys, distinct */
	uint8_t    *in;				/* reference: u[i] is in the table */
	size_t		n;
	uint64_t	rng;
	const char *what;			/* configuration, for messages */
	int			growing;		/* the table is not fixed_size */
	int			round;
} round_state;

static uint64_t
count_in(const round_state *r)
{
	uint64_t	c = 0;

	for (size_t i = 0; i < r->n; i++)
		c += r->in[i];
	return c;
}

/* The table holds exactly the reference set: 1 if so. */
static int
verify(round_state *r, const char *after)
{
	uint8_t    *found = malloc(r->n);
	size_t		lost = 0,
				extra = 0;
	uint64_t	count = cpht_table_count(r->t);
	cpht_status rc = cpht_table_find(r->t, r->u, r->n, found);

	CHECK(rc == CPHT_OK, "%s round %d: find after %s: %s", r->what, r->round, after, cpht_table_error(r->t));
	for (size_t i = 0; rc == CPHT_OK && i < r->n; i++)
	{
		lost += r->in[i] && !found[i];
		extra += !r->in[i] && found[i];
	}
	CHECK(lost == 0 && extra == 0, "%s round %d: after %s: %zu keys lost, %zu keys too many",
		  r->what, r->round, after, lost, extra);
	CHECK(count == count_in(r), "%s round %d: after %s: count %llu, expected %llu", r->what, r->round,
		  after, (unsigned long long) count, (unsigned long long) count_in(r));
	free(found);
	return rc == CPHT_OK && lost == 0 && extra == 0 && count == count_in(r);
}

/* Delete a random subset of the present keys: 10 keys, 10 %, 30 % or all. */
static void
delete_some(round_state *r)
{
	uint64_t	present = count_in(r);
	int			how = (int) (unit_rand(&r->rng) % 4);
	uint64_t	want = how == 0 ? 10 : how == 1 ? present / 10 : how == 2 ? present * 3 / 10 : present;
	uint64_t   *keys = malloc((r->n + 1) * sizeof(uint64_t));
	size_t	   *idx = malloc((r->n + 1) * sizeof(size_t));
	uint8_t    *flags = malloc(r->n + 1);
	size_t		m = 0,
				p = 0;

	for (size_t i = 0; i < r->n; i++)
		if (r->in[i])
			idx[p++] = i;
	/* A random choice of `want` of the p present keys (partial shuffle). */
	for (size_t i = 0; i < p && m < want; i++)
	{
		size_t		j = i + (size_t) (unit_rand(&r->rng) % (p - i));
		size_t		tmp = idx[i];

		idx[i] = idx[j];
		idx[j] = tmp;
		keys[m++] = r->u[idx[i]];
	}
	/* and one absent key, which must not be reported */
	for (size_t i = 0; i < r->n; i++)
		if (!r->in[i])
		{
			keys[m++] = r->u[i];
			break;
		}
	if (cpht_table_erase(r->t, keys, m, flags) == CPHT_OK)
	{
		for (size_t i = 0; i < m; i++)
		{
			int			was = i < (size_t) want && i < p;

			CHECK(flags[i] == was, "%s round %d: erase reported %d for a key that was %s",
				  r->what, r->round, flags[i], was ? "present" : "absent");
			if (was)
				r->in[idx[i]] = 0;
		}
	}
	else
		CHECK(0, "%s round %d: erase failed: %s", r->what, r->round, cpht_table_error(r->t));
	free(keys);
	free(idx);
	free(flags);
}

/* Insert up to 200 absent keys; a call the table refuses changes nothing. */
static void
insert_some(round_state *r)
{
	size_t		want = 1 + (size_t) (unit_rand(&r->rng) % (r->growing ? 1000 : 200));
	uint64_t   *keys = malloc(want * sizeof(uint64_t));
	size_t	   *idx = malloc(want * sizeof(size_t));
	uint8_t    *status = malloc(want);
	size_t		m = 0,
				start = (size_t) (unit_rand(&r->rng) % r->n);
	cpht_status rc;

	for (size_t k = 0; k < r->n && m < want; k++)
	{
		size_t		i = (start + k) % r->n;

		if (!r->in[i])
		{
			idx[m] = i;
			keys[m++] = r->u[i];
		}
	}
	rc = cpht_table_find_or_put(r->t, keys, m, status);
	CHECK(rc == CPHT_OK || rc == CPHT_ERR_FULL, "%s round %d: insert failed: %s", r->what, r->round,
		  cpht_table_error(r->t));
	for (size_t i = 0; rc == CPHT_OK && i < m; i++)
		r->in[idx[i]] = 1;
	free(keys);
	free(idx);
	free(status);
}

static void
run_round(const cpht_params *base, const char *what, int round, uint64_t seed)
{
	round_state r;
	cpht_params p = *base;
	char		err[256];
	uint8_t    *saved[MAX_SAVEPOINTS + 1];
	uint64_t	pos[MAX_SAVEPOINTS + 1];
	int			nsave = 0;
	size_t		batch = 64;
	uint8_t    *status = malloc(batch);
	uint64_t	grows_before = 0;

	memset(&r, 0, sizeof(r));
	r.rng = seed;
	r.what = what;
	r.round = round;
	r.growing = !p.fixed_size;
	p.seed = unit_rand(&r.rng);
	if (cpht_table_create(&p, &r.t, err, sizeof(err)) != CPHT_OK)
	{
		CHECK(0, "%s: create: %s", what, err);
		free(status);
		return;
	}

	/* The round's keys: distinct, below 2^key_bits. */
	r.n = (r.growing ? GROWING_UNIVERSE_FACTOR : UNIVERSE_FACTOR) * (p.slots[0] + p.slots[1]);
	r.u = malloc(r.n * sizeof(uint64_t));
	r.in = calloc(r.n, 1);
	for (size_t i = 0; i < r.n;)
	{
		uint64_t	k = unit_rand(&r.rng);
		size_t		j;

		if (p.key_bits < 64)
			k &= ((uint64_t) 1 << p.key_bits) - 1;
		for (j = 0; j < i && r.u[j] != k; j++)
			;
		if (j == i)
			r.u[i++] = k;
	}

	/* Committed state: fill until the table refuses a batch, or (growing)
	 * with three eighths of the keys, three times the first size. */
	for (size_t at = 0; at < (r.growing ? r.n * 3 / 8 : r.n); at += batch)
	{
		size_t		m = r.n - at < batch ? r.n - at : batch;
		cpht_status rc = cpht_table_find_or_put(r.t, r.u + at, m, status);

		if (rc == CPHT_ERR_FULL)
			break;
		CHECK(rc == CPHT_OK, "%s: fill: %s", what, cpht_table_error(r.t));
		for (size_t i = 0; i < m; i++)
			r.in[at + i] = 1;
	}
	verify(&r, "the fill");

	/* A full table rebuilds in place. */
	CHECK(cpht_table_rebuild(r.t) == CPHT_OK, "%s round %d: rebuild of the filled table: %s",
		  what, round, cpht_table_error(r.t));
	verify(&r, "a rebuild of the filled table");

	if (r.growing)
	{
		cpht_stats	st;

		CHECK(cpht_table_stats(r.t, &st) == CPHT_OK && st.grows >= 2,
			  "%s round %d: the committed keys grew the table twice (grew %llu times)",
			  what, round, (unsigned long long) st.grows);
		grows_before = st.grows;
	}

	/* The transaction. */
	cpht_table_set_logging(r.t, 1);
	pos[0] = cpht_table_log_position(r.t);
	saved[0] = malloc(r.n);
	memcpy(saved[0], r.in, r.n);
	nsave = 1;
	for (int step = 0; step < STEPS && unit_failures == 0; step++)
	{
		int			what_now = (int) (unit_rand(&r.rng) % 10);

		if (what_now < 4)
		{
			delete_some(&r);
			verify(&r, "a delete");
		}
		else if (what_now < 6)
		{
			insert_some(&r);
			verify(&r, "an insert");
		}
		else if (what_now < 8 && nsave <= MAX_SAVEPOINTS)
		{
			pos[nsave] = cpht_table_log_position(r.t);
			saved[nsave] = malloc(r.n);
			memcpy(saved[nsave++], r.in, r.n);
		}
		else if (what_now == 8)
		{
			CHECK(cpht_table_rebuild(r.t) == CPHT_OK, "%s round %d: rebuild in a transaction: %s",
				  what, round, cpht_table_error(r.t));
			verify(&r, "a rebuild in a transaction");
		}
		else
		{
			/* ROLLBACK TO SAVEPOINT: back to a random one, which stays. */
			int			s = (int) (unit_rand(&r.rng) % (uint64_t) nsave);

			CHECK(cpht_table_rollback_to(r.t, pos[s]) == CPHT_OK, "%s round %d: rollback to savepoint: %s",
				  what, round, cpht_table_error(r.t));
			memcpy(r.in, saved[s], r.n);
			while (nsave > s + 1)
				free(saved[--nsave]);
			verify(&r, "a rollback to a savepoint");
		}
	}
	/* Whole-transaction ROLLBACK (or, one round in four, COMMIT). */
	if (unit_rand(&r.rng) % 4 == 0)
		cpht_table_truncate_log(r.t, 0);
	else
	{
		CHECK(cpht_table_rollback_to(r.t, 0) == CPHT_OK, "%s round %d: rollback: %s", what, round,
			  cpht_table_error(r.t));
		memcpy(r.in, saved[0], r.n);
	}
	verify(&r, "the end of the transaction");
	cpht_table_set_logging(r.t, 0);
	if (r.growing)
	{
		cpht_stats	st;

		if (cpht_table_stats(r.t, &st) == CPHT_OK)
			grows_in_transactions += st.grows - grows_before;
	}

	while (nsave > 0)
		free(saved[--nsave]);
	cpht_table_destroy(r.t);
	free(r.u);
	free(r.in);
	free(status);
}

int
main(void)
{
	static const int widths[] = {16, 32, 37, 64};
	const char *env = getenv("CPHT_PROPERTY_ROUNDS");
	const char *seed_env = getenv("CPHT_PROPERTY_SEED");
	int			rounds = env ? atoi(env) : 3;
	uint64_t	seed = seed_env ? strtoull(seed_env, NULL, 10) : 1;
	char		why[256];
	int			gpu = cpht_gpu_usable(why, sizeof(why));
	int			total = 0;

	if (!gpu)
		printf("# GPU part skipped: %s\n", why);
	for (int device = 0; device < 1 + gpu; device++)
		for (int kind = 0; kind < 2; kind++)
			for (size_t w = 0; w < 2 * sizeof(widths) / sizeof(widths[0]); w++)
			{
				int			growing = w % 2;

				cpht_params p;
				char		what[64];

				if (cpht_params_for_capacity((cpht_kind) kind, CAPACITY, widths[w / 2], &p, why, sizeof(why)) != CPHT_OK)
				{
					CHECK(0, "params: %s", why);
					continue;
				}
				p.device = device ? CPHT_DEVICE_GPU : CPHT_DEVICE_CPU;
				p.cpu_threads = 2;
				p.fixed_size = !growing;
				snprintf(what, sizeof(what), "%s %s %d-bit %s", device ? "GPU" : "CPU",
						 kind ? "cuckoo" : "iceberg", widths[w / 2], growing ? "growing" : "fixed");
				for (int i = 0; i < rounds && unit_failures == 0; i++)
				{
					run_round(&p, what, i, seed * 1000003u + (uint64_t) i * 7919u + (uint64_t) w * 31u + (uint64_t) kind);
					total++;
				}
			}
	printf("# %d rounds (%d per configuration, first seed %llu); growing tables grew %llu times inside transactions\n",
		   total, rounds, (unsigned long long) seed, (unsigned long long) grows_in_transactions);
	CHECK(grows_in_transactions > 0, "no growing table grew inside a transaction");
	UNIT_DONE();
}
