/*
 * reference_set.h — a plain open-addressing set of 64-bit keys, the oracle
 * the unit tests compare the tables with.
 */
#ifndef CPHT_REFERENCE_SET_H
#define CPHT_REFERENCE_SET_H

#include <stdint.h>
#include <stdlib.h>

typedef struct ref_set
{
	uint64_t   *keys;
	uint8_t    *used;
	uint64_t	mask;
	uint64_t	count;
} ref_set;

static inline void
ref_init(ref_set *s, uint64_t capacity)
{
	uint64_t	size = 16;

	while (size < capacity * 2)
		size <<= 1;
	s->keys = calloc(size, sizeof(uint64_t));
	s->used = calloc(size, 1);
	s->mask = size - 1;
	s->count = 0;
}

static inline void
ref_free(ref_set *s)
{
	free(s->keys);
	free(s->used);
}

static inline uint64_t
ref_slot(const ref_set *s, uint64_t key)
{
	uint64_t	i = (key * 0x9e3779b97f4a7c15ULL) >> 17;

	for (;; i++)
	{
		i &= s->mask;
		if (!s->used[i] || s->keys[i] == key)
			return i;
	}
}

static inline int
ref_has(const ref_set *s, uint64_t key)
{
	return s->used[ref_slot(s, key)];
}

/* Returns 1 when the key was new. */
static inline int
ref_add(ref_set *s, uint64_t key)
{
	uint64_t	i = ref_slot(s, key);

	if (s->used[i])
		return 0;
	s->used[i] = 1;
	s->keys[i] = key;
	s->count++;
	return 1;
}

/* Deletion by backward-shift keeps linear probing exact. */
static inline int
ref_del(ref_set *s, uint64_t key)
{
	uint64_t	i = ref_slot(s, key),
				j;

	if (!s->used[i])
		return 0;
	s->used[i] = 0;
	s->count--;
	for (j = (i + 1) & s->mask; s->used[j]; j = (j + 1) & s->mask)
	{
		uint64_t	k = s->keys[j];

		s->used[j] = 0;
		s->count--;
		ref_add(s, k);
	}
	return 1;
}

#endif
