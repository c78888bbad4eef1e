/*
 * test_scan.c — cpht_table_scan_keys reads back exactly the keys a table
 * holds, in pieces of any size, for both kinds, slot widths of 16, 32 and
 * 64 bits, a table with deleted keys, a cuckoo table with a stash, and (where
 * one is usable) on the GPU; cpht_table_changes moves with every change of
 * the keys and only then.
 */
#include <string.h>

#include "cpht_table.h"
#include "table/table_layer.h"
#include "unit.h"
#include "unit_tables.h"

static int
cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a,
				y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

/* Every key of the table, read in pieces of `piece`, sorted; *n of them. */
static uint64_t *
scan_all(cpht_table *t, size_t piece, size_t *n)
{
	uint64_t	end = cpht_table_scan_end(t);
	uint64_t	pos = 0;
	uint64_t   *all = malloc((end + 1) * sizeof(uint64_t));
	uint64_t   *buf = malloc(piece * sizeof(uint64_t));

	*n = 0;
	while (pos < end)
	{
		size_t		got = 0;
		uint64_t	before = pos;

		CHECK(cpht_table_scan_keys(t, &pos, buf, piece, &got) == CPHT_OK, "scan: %s", cpht_table_error(t));
		CHECK(got <= piece && pos > before && pos - before <= piece,
			  "a piece of %zu read %zu keys, moved %llu positions", piece, got,
			  (unsigned long long) (pos - before));
		if (pos == before)
			break;
		memcpy(all + *n, buf, got * sizeof(uint64_t));
		*n += got;
	}
	free(buf);
	qsort(all, *n, sizeof(uint64_t), cmp);
	return all;
}

static void
check_keys(cpht_table *t, const uint64_t *want, size_t nwant, const char *what)
{
	static const size_t pieces[] = {1, 7, 1000, 1 << 20};

	for (size_t p = 0; p < sizeof(pieces) / sizeof(pieces[0]); p++)
	{
		size_t		n;
		uint64_t   *got = scan_all(t, pieces[p], &n);
		int			same = n == nwant;

		for (size_t i = 0; same && i < n; i++)
			same = got[i] == want[i];
		CHECK(same, "%s, pieces of %zu: %zu keys read back, %zu expected", what, pieces[p], n, nwant);
		free(got);
	}
}

static void
round_trip(cpht_kind kind, cpht_device dev, int key_bits, uint64_t nkeys)
{
	cpht_table *t = unit_table(kind, dev, nkeys, key_bits, 7);
	uint64_t   *keys = malloc(nkeys * sizeof(uint64_t));
	uint8_t    *status = malloc(nkeys);
	uint64_t	state = 99 + (uint64_t) key_bits;
	uint64_t	mask = key_bits == 64 ? UINT64_MAX : (((uint64_t) 1 << key_bits) - 1);
	uint64_t	changes,
				inserted;
	size_t		nlive,
				ndel = nkeys / 3;
	char		what[128];

	if (t == NULL)
		return;
	for (uint64_t i = 0; i < nkeys; i++)
		keys[i] = unit_rand(&state) & mask;
	if (key_bits == 64)
	{
		keys[0] = 0;
		keys[1] = UINT64_MAX;
	}
	CHECK(cpht_table_find_or_put(t, keys, nkeys, status) == CPHT_OK, "fop: %s", cpht_table_error(t));
	qsort(keys, nkeys, sizeof(uint64_t), cmp);
	nlive = 0;
	for (uint64_t i = 0; i < nkeys; i++)
		if (nlive == 0 || keys[nlive - 1] != keys[i])
			keys[nlive++] = keys[i];
	snprintf(what, sizeof(what), "%s %s key_bits %d", kind == CPHT_CUCKOO ? "cuckoo" : "iceberg",
			 dev == CPHT_DEVICE_GPU ? "gpu" : "cpu", key_bits);
	check_keys(t, keys, nlive, what);

	/* finds and a find-or-put of present keys change nothing */
	changes = cpht_table_changes(t);
	CHECK(cpht_table_find(t, keys, nlive, status) == CPHT_OK, "find");
	CHECK(cpht_table_find_or_put(t, keys, nlive, status) == CPHT_OK, "fop again");
	CHECK(cpht_table_changes(t) == changes, "%s: changes moved without a change", what);

	/* delete every third key: tombstones are not read back */
	CHECK(cpht_table_erase(t, keys, ndel, status) == CPHT_OK, "erase");
	CHECK(cpht_table_changes(t) != changes, "%s: a delete did not count as a change", what);
	check_keys(t, keys + ndel, nlive - ndel, what);
	changes = cpht_table_changes(t);
	CHECK(cpht_table_put(t, keys, 1, &inserted) == CPHT_OK && inserted == 1, "put");
	CHECK(cpht_table_changes(t) != changes, "%s: a put did not count as a change", what);
	changes = cpht_table_changes(t);
	CHECK(cpht_table_rebuild(t) == CPHT_OK, "rebuild");
	CHECK(cpht_table_changes(t) != changes, "%s: a rebuild did not count as a change", what);
	/* what is left: the key put back, then the keys never deleted */
	keys[ndel - 1] = keys[0];
	check_keys(t, keys + ndel - 1, nlive - ndel + 1, what);
	cpht_table_destroy(t);
	free(keys);
	free(status);
}

/* A cuckoo table whose stash holds keys: they are read back too. */
static void
stash_keys(void)
{
	cpht_table *t = unit_table(CPHT_CUCKOO, CPHT_DEVICE_CPU, 1000, 64, 7);
	uint64_t	stashed[3] = {5, 1u << 20, UINT64_MAX - 1};
	uint64_t	want[4];
	uint8_t		status[1];
	uint64_t	k = 77;

	CHECK(cpht_table_find_or_put(t, &k, 1, status) == CPHT_OK, "fop");
	CHECK(table_stash_add(t, stashed, 3) == CPHT_OK, "stash");
	want[0] = 5;
	want[1] = 77;
	want[2] = 1u << 20;
	want[3] = UINT64_MAX - 1;
	check_keys(t, want, 4, "cuckoo with a stash");
	cpht_table_destroy(t);
}

int
main(void)
{
	static const int widths[] = {64, 40, 24, 12};
	char		err[256];
	int			gpu = cpht_gpu_built() && cpht_gpu_usable(err, sizeof(err));

	for (int k = 0; k < 2; k++)
		for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++)
		{
			round_trip((cpht_kind) k, CPHT_DEVICE_CPU, widths[w], widths[w] == 12 ? 3000 : 50000);
			if (gpu)
				round_trip((cpht_kind) k, CPHT_DEVICE_GPU, widths[w], widths[w] == 12 ? 3000 : 50000);
		}
	stash_keys();
	if (!gpu)
		printf("# GPU scans skipped: %s\n", cpht_gpu_built() ? err : "no GPU support in this build");
	UNIT_DONE();
}
