/*
 * radix_sort.c — LSD radix sort of (key, index) pairs: the cuckoo table's
 * sort-based find-or-put groups duplicate keys with it, and cpht_insert_new
 * orders the new rows by key and fetches them in heap order with it.
 * Stable, so the first occurrence of a key in the input stays first in its
 * run.  Passes whose byte is the same in every key (the high bytes of small
 * keys) are skipped.
 */
#include <stdlib.h>
#include <string.h>

#include "cpht_util.h"

int
cpht_sort_key_index(cpht_key_index *items, size_t n)
{
	cpht_key_index *tmp;
	cpht_key_index *src = items;
	cpht_key_index *dst;
	size_t		counts[8][256];

	if (n < 2)
		return 0;
	tmp = malloc(n * sizeof(cpht_key_index));
	if (tmp == NULL)
		return -1;
	dst = tmp;

	/* One read of the input builds the histograms of all eight bytes. */
	memset(counts, 0, sizeof(counts));
	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < 8; b++)
			counts[b][(items[i].key >> (8 * b)) & 0xff]++;

	for (int b = 0; b < 8; b++)
	{
		size_t		offset = 0;
		size_t		pos[256];
		cpht_key_index *swap;

		if (counts[b][(items[0].key >> (8 * b)) & 0xff] == n)
			continue;			/* every key has the same byte here */
		for (int d = 0; d < 256; d++)
		{
			pos[d] = offset;
			offset += counts[b][d];
		}
		for (size_t i = 0; i < n; i++)
			dst[pos[(src[i].key >> (8 * b)) & 0xff]++] = src[i];
		swap = src;
		src = dst;
		dst = swap;
	}
	if (src != items)
		memcpy(items, src, n * sizeof(cpht_key_index));
	free(tmp);
	return 0;
}
