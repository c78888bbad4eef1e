/*
 * pending.h — the pending map of a transactional shared table in the cpht
 * worker: each key an open transaction put or deleted, with that
 * transaction and the key's state before its first change.
 */
#ifndef CPHT_PENDING_H
#define CPHT_PENDING_H

#include "postgres.h"

struct XactTable;

typedef struct PendingEntry
{
	uint64		key;
	struct XactTable *owner;	/* NULL: the slot is free */
	TransactionId subxid;		/* the (sub)transaction of the first change:
								 * what another writer waits for */
	bool		before_present; /* the key's state before the first change */
	uint64		first;			/* index of the first change in the owner's
								 * undo list */
} PendingEntry;

typedef struct PendingMap
{
	PendingEntry *slots;		/* malloc'ed; a power of two of them */
	uint64		mask;
	uint64		count;
} PendingMap;

/* Room for `more` entries beyond those there, so that as many inserts
 * cannot fail; false when out of memory (the map is unchanged). */
extern bool pending_reserve(PendingMap *map, uint64 more);

/* Bytes the map holds, and the bytes pending_reserve(map, more) would add
 * to them (the old slots are freed once moved). */
extern uint64 pending_bytes(const PendingMap *map);
extern uint64 pending_reserve_bytes(const PendingMap *map, uint64 more);

/* The entry of a key, or NULL. */
extern PendingEntry *pending_find(const PendingMap *map, uint64 key);

/* The key's entry; when *found is false it is new, with only its key
 * set, for the caller to fill (pending_reserve made room for it). */
extern PendingEntry *pending_insert(PendingMap *map, uint64 key, bool *found);

extern void pending_remove(PendingMap *map, uint64 key);
extern void pending_free(PendingMap *map);

#endif							/* CPHT_PENDING_H */
