/*
 * pending.c — the pending map of a transactional shared table: an
 * open-addressing hash of keys (linear probing, at most half full, deletion
 * by backward shift so that lookups never meet tombstones) in malloc'ed
 * memory, which may pass the 1 GB of a palloc.
 *
 * The worker reserves room before it runs a call, so that recording the
 * call's changes afterwards cannot fail part way.
 */
#include "postgres.h"

#include "worker/pending.h"

static inline uint64
home(const PendingMap *map, uint64 key)
{
	/* keys may be sequential ids: spread them (a 64-bit mix) */
	key ^= key >> 33;
	key *= UINT64CONST(0xff51afd7ed558ccd);
	key ^= key >> 33;
	return key & map->mask;
}

static bool
grow(PendingMap *map, uint64 size)
{
	PendingEntry *old = map->slots;
	uint64		old_size = old ? map->mask + 1 : 0;
	PendingEntry *slots = calloc(size, sizeof(PendingEntry));

	if (slots == NULL)
		return false;
	map->slots = slots;
	map->mask = size - 1;
	for (uint64 i = 0; i < old_size; i++)
	{
		if (old[i].owner != NULL)
		{
			uint64		j = home(map, old[i].key);

			while (slots[j].owner != NULL)
				j = (j + 1) & map->mask;
			slots[j] = old[i];
		}
	}
	free(old);
	return true;
}

/* The slots a map needs for `more` entries beyond its own (its size when
 * it has room). */
static uint64
reserved_size(const PendingMap *map, uint64 more)
{
	uint64		want = map->count + more;
	uint64		size = map->slots ? map->mask + 1 : 0;

	if (want * 2 <= size)
		return size;
	size = Max(size, 1024);
	while (size < want * 2)
		size *= 2;
	return size;
}

bool
pending_reserve(PendingMap *map, uint64 more)
{
	uint64		size = reserved_size(map, more);

	if (size == (map->slots ? map->mask + 1 : 0))
		return true;
	return grow(map, size);
}

uint64
pending_bytes(const PendingMap *map)
{
	return map->slots ? (map->mask + 1) * sizeof(PendingEntry) : 0;
}

uint64
pending_reserve_bytes(const PendingMap *map, uint64 more)
{
	return reserved_size(map, more) * sizeof(PendingEntry) - pending_bytes(map);
}

PendingEntry *
pending_find(const PendingMap *map, uint64 key)
{
	if (map->count == 0)
		return NULL;
	for (uint64 i = home(map, key);; i = (i + 1) & map->mask)
	{
		PendingEntry *e = &map->slots[i];

		if (e->owner == NULL)
			return NULL;
		if (e->key == key)
			return e;
	}
}

PendingEntry *
pending_insert(PendingMap *map, uint64 key, bool *found)
{
	uint64		i;

	Assert(map->slots != NULL && (map->count + 1) * 2 <= map->mask + 1);
	for (i = home(map, key); map->slots[i].owner != NULL; i = (i + 1) & map->mask)
	{
		if (map->slots[i].key == key)
		{
			*found = true;
			return &map->slots[i];
		}
	}
	*found = false;
	map->count++;
	map->slots[i].key = key;
	return &map->slots[i];
}

void
pending_remove(PendingMap *map, uint64 key)
{
	uint64		i,
				j;

	if (map->count == 0)
		return;
	for (i = home(map, key);; i = (i + 1) & map->mask)
	{
		if (map->slots[i].owner == NULL)
			return;
		if (map->slots[i].key == key)
			break;
	}
	/* Shift back each later entry of the run whose home is not in (i, j]. */
	for (j = (i + 1) & map->mask; map->slots[j].owner != NULL; j = (j + 1) & map->mask)
	{
		uint64		h = home(map, map->slots[j].key);

		if (((j - h) & map->mask) >= ((j - i) & map->mask))
		{
			map->slots[i] = map->slots[j];
			i = j;
		}
	}
	memset(&map->slots[i], 0, sizeof(PendingEntry));
	map->count--;
}

void
pending_free(PendingMap *map)
{
	free(map->slots);
	memset(map, 0, sizeof(*map));
}
