/*
 * table_stash.c — the cuckoo stash: keys no bucket could take after an undo,
 * kept sorted in host memory so find and erase see them.
 */
#include <stdlib.h>
#include <string.h>

#include "table/table_layer.h"

int
table_cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

int
table_in_sorted(const uint64_t *v, size_t n, uint64_t key)
{
	return n > 0 && bsearch(&key, v, n, sizeof(uint64_t), table_cmp_u64) != NULL;
}

/* Add keys (distinct, none already stashed) to the sorted stash. */
cpht_status
table_stash_add(cpht_table *t, const uint64_t *keys, size_t n)
{
	uint64_t   *grown = realloc(t->stash, (t->nstash + n) * sizeof(uint64_t));

	if (grown == NULL)
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for the cuckoo stash");
	memcpy(grown + t->nstash, keys, n * sizeof(uint64_t));
	t->stash = grown;
	t->nstash += n;
	qsort(t->stash, t->nstash, sizeof(uint64_t), table_cmp_u64);
	return CPHT_OK;
}

int
table_stash_remove(cpht_table *t, uint64_t key)
{
	uint64_t   *hit = t->nstash ? bsearch(&key, t->stash, t->nstash, sizeof(uint64_t), table_cmp_u64) : NULL;

	if (hit == NULL)
		return 0;
	memmove(hit, hit + 1, (size_t) (t->stash + t->nstash - hit - 1) * sizeof(uint64_t));
	t->nstash--;
	return 1;
}
