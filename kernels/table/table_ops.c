/*
 * table_ops.c — the batch operations (find-or-put, find, put, erase): split
 * into chunks, with the stash, the undo log and the all-or-nothing rule.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table/table_layer.h"

/* Keys per backend call in a long find-or-put, find or erase: between
 * chunks the call looks for an interrupt.  On two cores a CPU chunk of a
 * 30M-key table takes 10 to 60 ms, so a cancel is served well within
 * 100 ms; a GPU chunk takes tens of milliseconds, and larger chunks let it
 * overlap transfers longer. */
#define CPU_CHUNK_KEYS ((size_t) 1 << 18)
#define GPU_CHUNK_KEYS_PER_CALL ((size_t) 1 << 24)

/*
 * Find-or-put in the buckets (not the stash), chunk by chunk.  If a chunk
 * finds the table full, a device call fails or an interrupt arrives, the
 * chunks done so far are undone too, so the call is all or nothing.
 */
cpht_status
table_find_or_put_in_buckets(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	uint64_t   *homeless = NULL;
	size_t		most = t->params.device == CPHT_DEVICE_GPU ? GPU_CHUNK_KEYS_PER_CALL : CPU_CHUNK_KEYS;
	size_t		chunk = n < most ? n : most;
	size_t		done = 0;
	uint64_t	puts = 0;
	int			on_backend = t->logging && table_log_on_device(t);
	cpht_status rc = CPHT_OK;
	cpht_status log_rc;

	if (t->kind_policy->evicts)
	{
		homeless = malloc(chunk * sizeof(uint64_t));
		if (homeless == NULL)
			return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
	}
	while (done < n && rc == CPHT_OK)
	{
		size_t		m = n - done < chunk ? n - done : chunk;
		size_t		nhomeless = 0;
		cpht_tally	tally = {0, 0};
		char		why[sizeof(t->errmsg)];

		if (done > 0 && table_interrupted())
		{
			rc = table_undo_call(t, keys, done, status, NULL, 0);
			if (rc == CPHT_OK)
				rc = table_fail(t, CPHT_ERR_CANCELED, "canceled after %zu of %zu keys", done, n);
			break;
		}
		/*
		 * A backend store takes this chunk's inserts after the earlier
		 * chunks' (it grows chunk by chunk, so running out of device memory
		 * for it can happen in the middle of a call, undone like the rest).
		 */
		rc = on_backend ? table_log_reserve(t, puts, m) : CPHT_OK;
		if (rc == CPHT_OK)
			rc = t->ops->find_or_put(t, keys + done, m, status + done, homeless, &nhomeless,
										 &tally, on_backend ? t->log_len + puts : CPHT_NO_LOG);
		if (rc != CPHT_OK)
		{
			/*
			 * Keep the device's message; undo what earlier chunks put and
			 * what this one did before it failed (a backend reports that
			 * part, device_ops.h), with the keys its evictions left
			 * homeless.
			 */
			memcpy(why, t->errmsg, sizeof(why));
			if (table_undo_call(t, keys, done + m, status, homeless, nhomeless) == CPHT_OK)
			{
				if (done > 0)
					snprintf(t->errmsg, sizeof(t->errmsg),
							 "%s (after %zu of %zu keys, which were taken out again)", why, done, n);
				else
					memcpy(t->errmsg, why, sizeof(why));
			}
			break;
		}
		puts += tally.hits;
		done += m;
		if (tally.full > 0 || nhomeless > 0)
		{
			rc = table_undo_call(t, keys, done, status, homeless, nhomeless);
			if (rc == CPHT_OK)
				rc = table_fail(t, CPHT_ERR_FULL,
								"the table is full: a key found no free slot after %llu keys",
								(unsigned long long) t->count);
		}
	}
	/* Host store: log what the call inserted; without room, undo the call. */
	if (rc == CPHT_OK && !on_backend && (log_rc = table_log_reserve(t, 0, puts)) != CPHT_OK)
	{
		char		why[sizeof(t->errmsg)];

		memcpy(why, t->errmsg, sizeof(why));
		rc = table_undo_call(t, keys, n, status, NULL, 0);
		if (rc == CPHT_OK)
		{
			memcpy(t->errmsg, why, sizeof(why));
			rc = log_rc;		/* out of memory, or past the memory hook's limit */
		}
	}
	if (rc == CPHT_OK)
	{
		double		log_start = table_clock_ms();

		t->count += puts;
		if (puts > 0)
			t->changes++;
		if (on_backend)
			table_log_mark(t, 0, puts);
		else
			table_log_append(t, keys, n, status, CPHT_PUT, 0, puts);
		t->times.undo_log += table_clock_ms() - log_start;
	}
	free(homeless);
	return rc;
}

static cpht_status
find_or_put_once(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	uint64_t   *rest;
	size_t	   *where;
	uint8_t    *sub;
	size_t		nrest = 0;
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	if (t->nstash == 0)
		return table_find_or_put_in_buckets(t, keys, n, status);

	/* Stashed keys are present; the buckets see only the others. */
	rest = malloc(n * sizeof(uint64_t));
	where = malloc(n * sizeof(size_t));
	sub = malloc(n);
	if (!rest || !where || !sub)
		rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
	else
	{
		for (size_t i = 0; i < n; i++)
		{
			status[i] = CPHT_FOUND;
			if (!table_in_sorted(t->stash, t->nstash, keys[i]))
			{
				rest[nrest] = keys[i];
				where[nrest++] = i;
			}
		}
		rc = nrest ? table_find_or_put_in_buckets(t, rest, nrest, sub) : CPHT_OK;
		for (size_t j = 0; rc == CPHT_OK && j < nrest; j++)
			status[where[j]] = sub[j];
	}
	free(rest);
	free(where);
	free(sub);
	return rc;
}

/*
 * Find-or-put that grows the table (table_grow.c) when it is past its safe
 * fill before the call (to twice the buckets), or when the call runs out of room
 * (to hold all the call's keys as well): the failed attempt was undone
 * whole, so after growing the call runs again from the start and its
 * answers are those of one call on the larger table.  A
 * growth before the call that fails for memory is not an error (the call
 * may fit); one after a full attempt is the call's error.
 */
cpht_status
table_find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	/* A key wider than the table widens it first (table_widen.c). */
	rc = table_widen_for(t, keys, n);
	if (rc != CPHT_OK)
		return rc;
	/*
	 * Not from how many keys the call brings: they may all be stored
	 * already, and a table must not grow for keys it has.
	 */
	if (!t->params.fixed_size && table_past_safe_fill(t))
	{
		rc = table_grow(t, 0);
		if (rc != CPHT_OK && rc != CPHT_ERR_FULL && rc != CPHT_ERR_LIMIT && rc != CPHT_ERR_NOMEM)
			return rc;
	}
	for (;;)
	{
		char		why[sizeof(t->errmsg)];

		rc = find_or_put_once(t, keys, n, status);
		if (rc != CPHT_ERR_FULL || t->params.fixed_size)
			return rc;
		memcpy(why, t->errmsg, sizeof(why));
		/*
		 * Room for every key of the call as if all were new: one growth,
		 * not one failed attempt per doubling.  A batch that
		 * repeats stored keys makes the table larger than it needs by at
		 * most its own length.
		 */
		rc = table_grow(t, t->count + n);
		if (rc == CPHT_ERR_FULL)
		{
			char		grow_why[sizeof(t->errmsg)];

			memcpy(grow_why, t->errmsg, sizeof(grow_why));
			snprintf(t->errmsg, sizeof(t->errmsg), "%s; %s", why, grow_why);
		}
		if (rc != CPHT_OK)
			return rc;
	}
}

cpht_status
table_single_find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	table_settle(t);
	table_call_begin(t);
	return table_call_end(t, table_find_or_put(t, keys, n, status));
}

/*
 * Keys wider than an auto_key_bits table are absent, and its slots could
 * not even say so (a remainder too wide for them would lose bits): the
 * device sees only the others.  Returns the number of keys that fit,
 * packed into *fit with their positions in *at, or n with *fit = keys
 * when all do; SIZE_MAX when host memory ran out.
 */
static size_t
fitting_keys(cpht_table *t, const uint64_t *keys, size_t n, const uint64_t **fit,
			 size_t **at)
{
	uint64_t   *sub;
	size_t		m = 0;
	int			held;

	*fit = keys;
	*at = NULL;
	if (table_keys_fit(t, keys, n))
		return n;
	sub = malloc((n + 1) * sizeof(uint64_t));
	*at = malloc((n + 1) * sizeof(size_t));
	if (sub == NULL || *at == NULL)
	{
		free(sub);
		free(*at);
		*at = NULL;
		table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
		return SIZE_MAX;
	}
	held = table_slot_key_bits(t);
	for (size_t i = 0; i < n; i++)
		if (table_key_fits(t, keys[i], held))
		{
			sub[m] = keys[i];
			(*at)[m++] = i;
		}
	*fit = sub;
	return m;
}

static cpht_status
find_fitting(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found);

cpht_status
table_single_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	const uint64_t *fit;
	size_t	   *at;
	size_t		m;
	uint8_t    *sub;
	cpht_status rc;

	table_settle(t);
	table_call_begin(t);
	m = fitting_keys(t, keys, n, &fit, &at);
	if (m == SIZE_MAX)
		return table_call_end(t, CPHT_ERR_NOMEM);
	if (at == NULL)
		return table_call_end(t, find_fitting(t, keys, n, found));
	sub = malloc(m + 1);
	if (sub == NULL)
		rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
	else
		rc = find_fitting(t, fit, m, sub);
	if (rc == CPHT_OK)
	{
		memset(found, 0, n);
		for (size_t j = 0; j < m; j++)
			found[at[j]] = sub[j];
	}
	free(sub);
	free((void *) fit);
	free(at);
	return table_call_end(t, rc);
}

static cpht_status
find_fitting(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	size_t		most = t->params.device == CPHT_DEVICE_GPU ? GPU_CHUNK_KEYS_PER_CALL : CPU_CHUNK_KEYS;
	cpht_status rc = CPHT_OK;

	/* Chunk by chunk, for the interrupt check; a find changes nothing, so
	 * a cancel just stops. */
	for (size_t done = 0; rc == CPHT_OK && done < n; done += most)
	{
		size_t		m = n - done < most ? n - done : most;

		if (done > 0 && table_interrupted())
			return table_fail(t, CPHT_ERR_CANCELED, "canceled after %zu of %zu keys", done, n);
		rc = t->ops->find(t, keys + done, m, found + done);
	}
	for (size_t i = 0; rc == CPHT_OK && t->nstash > 0 && i < n; i++)
		if (!found[i])
			found[i] = (uint8_t) table_in_sorted(t->stash, t->nstash, keys[i]);
	return rc;
}

cpht_status
table_single_put(cpht_table *t, const uint64_t *keys, size_t n, uint64_t *inserted)
{
	uint8_t    *status;
	uint64_t	before;
	cpht_status rc;

	table_settle(t);
	table_call_begin(t);
	before = t->count;
	*inserted = 0;
	if (n == 0)
		return table_call_end(t, CPHT_OK);
	status = malloc(n);
	if (status == NULL)
		return table_call_end(t, table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n));
	rc = table_find_or_put(t, keys, n, status);
	if (rc == CPHT_OK)
		*inserted = t->count - before;
	free(status);
	return table_call_end(t, rc);
}

/*
 * Erase, chunk by chunk (an interrupt is looked for between chunks).  Every
 * key a chunk removed is kept with its place (the backend's CPHT_WHERE, or
 * CPHT_WHERE_STASH), so that a call failing or canceled part way puts the
 * earlier chunks' keys back exactly where they were, and the undo log,
 * kept here in the same way for both devices, lets a rollback do the same.
 */
cpht_status
table_erase_keys(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present)
{
	size_t		most = t->params.device == CPHT_DEVICE_GPU ? GPU_CHUNK_KEYS_PER_CALL : CPU_CHUNK_KEYS;
	uint64_t   *gone = NULL;		/* removed keys, in removal order */
	uint8_t    *where = NULL;		/* ... and their places */
	size_t		ngone = 0,
				done = 0;
	cpht_status rc;

	rc = table_log_reserve(t, 0, n);
	if (rc == CPHT_OK)
		rc = table_log_reserve_where(t, n);
	if (rc != CPHT_OK)
		return rc;
	gone = malloc(n * sizeof(uint64_t));
	where = malloc(n);
	if (gone == NULL || where == NULL)
	{
		free(gone);
		free(where);
		return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
	}
	while (done < n)
	{
		size_t		m = n - done < most ? n - done : most;
		cpht_tally	tally = {0, 0};

		if (done > 0 && table_interrupted())
		{
			rc = table_fail(t, CPHT_ERR_CANCELED, "canceled after %zu of %zu keys", done, n);
			break;
		}
		rc = t->ops->erase(t, keys + done, m, present + done, 0, &tally, CPHT_NO_LOG);
		for (size_t i = done; i < done + m; i++)
		{
			/* A failed chunk reports the keys it removed before failing
			 * (device_ops.h): they go back with the others. */
			if (rc != CPHT_OK)
			{
				if (present[i] != 0)
				{
					gone[ngone] = keys[i];
					where[ngone++] = present[i];
				}
				continue;
			}
			if (present[i] == 0 && t->nstash > 0 && table_stash_remove(t, keys[i]))
				present[i] = CPHT_WHERE_STASH;
			if (present[i] != 0)
			{
				gone[ngone] = keys[i];
				where[ngone++] = present[i];
				present[i] = 1;
			}
		}
		if (rc != CPHT_OK)
			break;
		done += m;
	}
	/* The backend store takes the keys from host memory. */
	if (rc == CPHT_OK && t->logging && ngone > 0 && table_log_on_device(t))
		rc = t->ops->log_store->write(t, t->log_len, gone, ngone);
	if (rc != CPHT_OK)
	{
		char		why[sizeof(t->errmsg)];
		cpht_status undo;

		/* Nothing is deleted without a log entry: put the keys back. */
		memcpy(why, t->errmsg, sizeof(why));
		t->count -= ngone;		/* table_put_back counts them in again */
		t->changes++;
		undo = table_put_back(t, gone, where, ngone);
		if (undo == CPHT_OK)
			memcpy(t->errmsg, why, sizeof(why));
		else
			rc = undo;
	}
	else
	{
		t->count -= ngone;
		if (ngone > 0)
			t->changes++;
		if (t->logging && ngone > 0)
		{
			if (!table_log_on_device(t))
				memcpy(t->log_keys + t->log_len, gone, ngone * sizeof(uint64_t));
			memcpy(t->log_where + t->log_nwhere, where, ngone);
			table_log_mark(t, 1, ngone);
		}
	}
	free(gone);
	free(where);
	return rc;
}

cpht_status
table_single_erase(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present)
{
	const uint64_t *fit;
	size_t	   *at;
	size_t		m;
	uint8_t    *sub;
	cpht_status rc;

	table_settle(t);
	table_call_begin(t);
	if (n == 0)
		return table_call_end(t, CPHT_OK);
	m = fitting_keys(t, keys, n, &fit, &at);
	if (m == SIZE_MAX)
		return table_call_end(t, CPHT_ERR_NOMEM);
	if (at == NULL)
		return table_call_end(t, table_erase_keys(t, keys, n, present));
	/* Keys wider than the table are absent (fitting_keys). */
	sub = malloc(m + 1);
	if (sub == NULL)
		rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
	else
		rc = m > 0 ? table_erase_keys(t, fit, m, sub) : CPHT_OK;
	if (rc == CPHT_OK)
	{
		memset(present, 0, n);
		for (size_t j = 0; j < m; j++)
			present[at[j]] = sub[j];
	}
	free(sub);
	free((void *) fit);
	free(at);
	return table_call_end(t, rc);
}
