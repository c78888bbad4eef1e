/*
 * table_rollback.c — taking changes out again: undoing a call that failed
 * part way (full table, device fault, interrupt) and rolling the undo log
 * back to a savepoint.
 */
#include <stdlib.h>
#include <string.h>

#include "table/table_layer.h"

#define MAX_STASH_RETRIES 4

/*
 * The call put the keys marked CPHT_PUT and then some key found no slot.
 * Take the call's keys out again so the table holds exactly what it held
 * before.  A kind whose policy has undo_to_empty (iceberg): the call's keys
 * took slots that were empty and nothing came after them, so emptying
 * those slots restores the table bit for bit.  A kind that evicts
 * (cuckoo): evictions moved older keys, so the call's keys become
 * tombstones and any older key that an eviction chain left homeless is put
 * back (or, if no chain finds it a slot, kept in the stash, never
 * dropped).
 */
cpht_status
table_undo_call(cpht_table *t, const uint64_t *keys, size_t n, const uint8_t *status,
		  uint64_t *homeless, size_t nhomeless)
{
	uint64_t   *added = malloc((n ? n : 1) * sizeof(uint64_t));
	uint8_t    *flags = malloc(n ? n : 1);
	size_t		nadded = 0,
				nold = 0;
	cpht_tally	tally;
	cpht_status rc;

	t->changes++;
	if (added == NULL || flags == NULL)
	{
		free(added);
		free(flags);
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory while undoing a failed call");
	}
	for (size_t i = 0; i < n; i++)
		if (status[i] == CPHT_PUT)
			added[nadded++] = keys[i];

	rc = t->ops->erase(t, added, nadded, flags, t->kind_policy->undo_to_empty,
						   &tally, CPHT_NO_LOG);
	if (rc != CPHT_OK || !t->kind_policy->evicts)
		goto done;

	qsort(added, nadded, sizeof(uint64_t), table_cmp_u64);
	for (size_t h = 0; h < nhomeless; h++)
		if (!table_in_sorted(added, nadded, homeless[h]))
			homeless[nold++] = homeless[h];

	t->reinserting = 1;
	for (int attempt = 0; attempt < MAX_STASH_RETRIES && nold > 0 && rc == CPHT_OK; attempt++)
	{
		size_t		still = 0;

		/* These keys are absent, so the backend inserts every one of them. */
		rc = t->ops->find_or_put(t, homeless, nold, flags, added, &still,
									 &tally, CPHT_NO_LOG);
		memcpy(homeless, added, still * sizeof(uint64_t));
		nold = still;
	}
	t->reinserting = 0;
	if (rc == CPHT_OK && nold > 0)
		rc = table_stash_add(t, homeless, nold);

done:
	free(added);
	free(flags);
	return rc;
}

/*
 * Put back deleted keys (known to be absent) each into the slot it was
 * deleted from, `where` as erase reported it.  That slot still holds the
 * key's tombstone: undo runs newest first, so everything done to the table
 * after the deletion is undone already, iceberg find-or-put never takes a
 * tombstone, cuckoo puts and evictions leave tombstones alone while the
 * log holds deleted keys (keep_tombstones), and a rebuild keeps the
 * tombstones the log refers to and tells the log where they went.  So a
 * rollback needs no free space.  A key whose slot was no tombstone after
 * all (a broken rule) goes to the stash, which holds any number of keys:
 * still found, never dropped.
 */
cpht_status
table_put_back(cpht_table *t, const uint64_t *keys, const uint8_t *where, size_t n)
{
	uint64_t   *slotted = malloc((n ? n : 1) * sizeof(uint64_t));
	uint8_t    *places = malloc(n ? n : 1);
	uint8_t    *status = malloc(n ? n : 1);
	uint64_t   *stashed = malloc((n ? n : 1) * sizeof(uint64_t));
	size_t		nslotted = 0,
				nstashed = 0;
	cpht_status rc = CPHT_OK;

	if (!slotted || !places || !status || !stashed)
		rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory while putting deleted keys back");
	for (size_t i = 0; rc == CPHT_OK && i < n; i++)
	{
		if (where[i] == CPHT_WHERE_STASH)
			stashed[nstashed++] = keys[i];
		else
		{
			slotted[nslotted] = keys[i];
			places[nslotted++] = where[i];
		}
	}
	if (rc == CPHT_OK && nslotted > 0)
		rc = t->ops->revive(t, slotted, places, nslotted, status);
	for (size_t i = 0; rc == CPHT_OK && i < nslotted; i++)
		if (status[i] != CPHT_PUT)
			stashed[nstashed++] = slotted[i];
	if (rc == CPHT_OK && nstashed > 0)
		rc = table_stash_add(t, stashed, nstashed);
	if (rc == CPHT_OK)
		t->count += n;
	t->changes++;
	free(slotted);
	free(places);
	free(status);
	free(stashed);
	return rc;
}

/* Take inserted keys out again (a rollback: no chunks, no interrupt). */
static cpht_status
take_out(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *flags)
{
	cpht_tally	tally = {0, 0};
	cpht_status rc = t->ops->erase(t, keys, n, flags, 0, &tally, CPHT_NO_LOG);

	t->changes++;
	if (rc != CPHT_OK)
		return rc;
	for (size_t i = 0; t->nstash > 0 && i < n; i++)
		if (flags[i] == 0 && table_stash_remove(t, keys[i]))
			tally.hits++;
	t->count -= tally.hits;
	return CPHT_OK;
}

cpht_status
table_single_rollback_to(cpht_table *t, uint64_t position)
{
	int			logging = t->logging;
	uint64_t	end,
				deletes = 0;
	const uint64_t *keys;
	uint64_t   *copied = NULL;
	uint8_t    *flags;
	cpht_tally	tally;
	cpht_status rc = CPHT_OK;

	table_settle(t);
	end = t->log_len;
	if (position >= end)
		return CPHT_OK;
	t->changes++;
	for (size_t r = 0; r < t->log_nruns; r++)
	{
		uint64_t	lo = t->log_runs[r].start > position ? t->log_runs[r].start : position;
		uint64_t	hi = r + 1 < t->log_nruns ? t->log_runs[r + 1].start : end;

		if (t->log_runs[r].deleted && hi > lo)
			deletes += hi - lo;
	}
	flags = malloc((size_t) (end - position));
	if (table_log_on_device(t))
		copied = malloc((size_t) (end - position) * sizeof(uint64_t));
	if (flags == NULL || (table_log_on_device(t) && copied == NULL))
	{
		free(flags);
		free(copied);
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory while rolling back");
	}
	/* keys[i] is entry position + i. */
	if (copied)
	{
		rc = t->ops->log_store->read(t, position, (size_t) (end - position), copied);
		keys = copied;
	}
	else
		keys = t->log_keys + position;
	t->logging = 0;

	if (rc != CPHT_OK)
		;
	else if (deletes == 0 && t->kind_policy->undo_to_empty && !t->log_moved)
	{
		/* Only inserts since the savepoint: they took slots that were empty
		 * then, so emptying them restores the table bit for bit. */
		rc = t->ops->erase(t, keys, end - position, flags, 1, &tally, CPHT_NO_LOG);
		if (rc == CPHT_OK)
			t->count -= end - position;
	}
	else
	{
		/* Newest first, one run of inserts or deletes at a time. */
		uint64_t	hi = end;

		for (size_t r = t->log_nruns; rc == CPHT_OK && r-- > 0 && hi > position;)
		{
			uint64_t	lo = t->log_runs[r].start > position ? t->log_runs[r].start : position;

			/* A deleted key goes back into its own slot, so the table is
			 * as it was at the start of the run, slot for slot. */
			if (t->log_runs[r].deleted)
				rc = table_put_back(t, keys + (lo - position),
									t->log_where + t->log_runs[r].where_at + (lo - t->log_runs[r].start),
									hi - lo);
			else
				rc = take_out(t, keys + (lo - position), hi - lo, flags);
			hi = lo;
		}
	}
	free(flags);
	free(copied);
	t->logging = logging;
	if (rc == CPHT_OK)
		table_single_truncate_log(t, position);
	return rc;
}

/*
 * Undo entries the caller read out of the log (cpht_table_log_read), newest
 * first, a run of inserted or deleted keys at a time.  Other calls may have
 * changed the table since, on other keys: an inserted key is taken out by
 * key wherever it is now and leaves a tombstone (emptying its slot could cut
 * a probe sequence of a key put after it), and a deleted key goes back into
 * its tombstone, which stayed reserved while the caller held it.
 */
cpht_status
table_single_undo(cpht_table *t, const uint64_t *keys, const uint8_t *where, size_t n)
{
	int			logging = t->logging;
	uint8_t    *flags;
	size_t		hi = n;
	cpht_status rc = CPHT_OK;

	table_settle(t);
	if (n == 0)
		return CPHT_OK;
	flags = malloc(n);
	if (flags == NULL)
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory while undoing %zu changes", n);
	t->logging = 0;
	while (rc == CPHT_OK && hi > 0)
	{
		int			deleted = where[hi - 1] != 0;
		size_t		lo = hi - 1;

		while (lo > 0 && (where[lo - 1] != 0) == deleted)
			lo--;
		if (deleted && t->held_places_stale)
		{
			/* The table grew since these places were read: the keys go
			 * back wherever a put puts them (a grown table has room, and a
			 * put may grow it again). */
			uint64_t	inserted;

			rc = table_single_put(t, keys + lo, hi - lo, &inserted);
		}
		else if (deleted)
			rc = table_put_back(t, keys + lo, where + lo, hi - lo);
		else
			rc = take_out(t, keys + lo, hi - lo, flags);
		hi = lo;
	}
	t->logging = logging;
	free(flags);
	return rc;
}
