/*
 * table_resident.c — find-or-put and find of one table on keys that
 * already lie in its device's memory (a sharded table routing a call over
 * its GPUs, kernels/shards/shards_route.c), with what table_ops.c does
 * around the device's call: growth before the call and when it runs out
 * of room, the undo log, the count, and the undo of a call that failed.
 * The undo reads the call's keys and answers back to the host: that path
 * is the rare one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table/table_layer.h"

int
table_single_resident_ok(const cpht_table *t)
{
	/*
	 * Stashed keys and keys wider than an automatic table take host
	 * passes over the keys (table_ops.c, table_widen.c); a log in host
	 * memory takes the inserted keys there.
	 */
	return t->ops->resident != NULL && t->nstash == 0 && !t->params.auto_key_bits &&
		(!t->logging || table_log_on_device(t));
}

/*
 * Undo a device call on resident keys: bring the keys and their answers to
 * the host and take out what the call put (table_undo_call).
 */
static cpht_status
undo_resident(cpht_table *t, const uint64_t *dkeys, size_t n, const uint8_t *dstatus,
			  uint64_t *homeless, size_t nhomeless)
{
	uint64_t   *keys = malloc((n ? n : 1) * sizeof(uint64_t));
	uint8_t    *status = malloc(n ? n : 1);
	cpht_status rc;

	if (keys == NULL || status == NULL)
		rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory while undoing a failed call");
	else
	{
		rc = t->ops->resident->to_host(t, keys, dkeys, n * sizeof(uint64_t));
		if (rc == CPHT_OK)
			rc = t->ops->resident->to_host(t, status, dstatus, n);
		if (rc == CPHT_OK)
			rc = table_undo_call(t, keys, n, status, homeless, nhomeless);
	}
	free(keys);
	free(status);
	return rc;
}

static cpht_status
fop_resident_once(cpht_table *t, const uint64_t *dkeys, size_t n, uint8_t *dstatus,
				  uint64_t *homeless)
{
	int			on_backend = t->logging && table_log_on_device(t);
	size_t		nhomeless = 0;
	cpht_tally	tally = {0, 0};
	char		why[sizeof(t->errmsg)];
	cpht_status rc;

	rc = on_backend ? table_log_reserve(t, 0, n) : CPHT_OK;
	if (rc != CPHT_OK)
		return rc;
	rc = t->ops->resident->find_or_put(t, dkeys, n, dstatus, homeless, &nhomeless, &tally,
									   on_backend ? t->log_len : CPHT_NO_LOG);
	if (rc != CPHT_OK)
	{
		/* keep the device's message; take out what the call did */
		memcpy(why, t->errmsg, sizeof(why));
		if (undo_resident(t, dkeys, n, dstatus, homeless, nhomeless) == CPHT_OK)
			memcpy(t->errmsg, why, sizeof(why));
		return rc;
	}
	if (tally.full > 0 || nhomeless > 0)
	{
		rc = undo_resident(t, dkeys, n, dstatus, homeless, nhomeless);
		if (rc == CPHT_OK)
			rc = table_fail(t, CPHT_ERR_FULL,
							"the table is full: a key found no free slot after %llu keys",
							(unsigned long long) t->count);
		return rc;
	}
	t->count += tally.hits;
	if (tally.hits > 0)
		t->changes++;
	if (on_backend)
		table_log_mark(t, 0, tally.hits);
	return CPHT_OK;
}

/*
 * The call through host memory, where the table can no longer take keys
 * in its device's memory as they are (a cuckoo growth stashed keys): the
 * keys to the host, table_find_or_put there (which knows the stash), the
 * answers back into dstatus.  The resident attempts before were undone
 * whole, so the answers are those of one call.
 */
static cpht_status
fop_through_host(cpht_table *t, const uint64_t *dkeys, size_t n, uint8_t *dstatus)
{
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *status = malloc(n);
	cpht_status rc;

	if (keys == NULL || status == NULL)
		rc = table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
	else
	{
		rc = t->ops->resident->to_host(t, keys, dkeys, n * sizeof(uint64_t));
		if (rc == CPHT_OK)
			rc = table_find_or_put(t, keys, n, status);
		if (rc == CPHT_OK)
		{
			rc = t->ops->resident->from_host(t, dstatus, status, n);
			/*
			 * The answers did not reach the device: the call fails and
			 * must leave no key of it.  A logging table is rolled back by
			 * the sharded table (to its log position before the call);
			 * otherwise the keys it put are erased here.
			 */
			if (rc != CPHT_OK && !t->logging)
			{
				char		why[sizeof(t->errmsg)];
				size_t		nput = 0;

				memcpy(why, t->errmsg, sizeof(why));
				for (size_t i = 0; i < n; i++)
					if (status[i] == CPHT_PUT)
						keys[nput++] = keys[i];
				if (nput == 0 || table_erase_keys(t, keys, nput, status) == CPHT_OK)
					memcpy(t->errmsg, why, sizeof(why));
			}
		}
	}
	free(keys);
	free(status);
	return rc;
}

/*
 * As table_find_or_put (table_ops.c) on a table that table_single_resident_ok
 * accepts: growth past the safe fill before the call, and after a call
 * that found no room (undone whole), the call again on the larger table,
 * through host memory if the growth stashed keys (the sharded table's
 * later calls then take the host path, shards_route.c).  On failure the table is as before and dstatus says nothing.
 */
cpht_status
table_single_find_or_put_resident(cpht_table *t, const uint64_t *dkeys, size_t n, uint8_t *dstatus)
{
	uint64_t   *homeless = NULL;
	cpht_status rc = CPHT_OK;

	table_settle(t);
	table_call_begin(t);
	if (n == 0)
		return table_call_end(t, CPHT_OK);
	if (t->kind_policy->evicts && (homeless = malloc(n * sizeof(uint64_t))) == NULL)
		return table_call_end(t, table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n));
	if (!t->params.fixed_size && table_past_safe_fill(t))
	{
		rc = table_grow(t, 0);
		if (rc == CPHT_ERR_FULL || rc == CPHT_ERR_LIMIT || rc == CPHT_ERR_NOMEM)
			rc = CPHT_OK;
	}
	while (rc == CPHT_OK)
	{
		char		why[sizeof(t->errmsg)];

		/* a growth stashed keys: the buckets no longer hold every key */
		if (!table_single_resident_ok(t))
		{
			rc = fop_through_host(t, dkeys, n, dstatus);
			break;
		}
		rc = fop_resident_once(t, dkeys, n, dstatus, homeless);
		if (rc != CPHT_ERR_FULL || t->params.fixed_size)
			break;
		memcpy(why, t->errmsg, sizeof(why));
		rc = table_grow(t, t->count + n);
		if (rc == CPHT_ERR_FULL)
		{
			char		grow_why[sizeof(t->errmsg)];

			memcpy(grow_why, t->errmsg, sizeof(grow_why));
			snprintf(t->errmsg, sizeof(t->errmsg), "%s; %s", why, grow_why);
		}
	}
	free(homeless);
	return table_call_end(t, rc);
}

cpht_status
table_single_find_resident(cpht_table *t, const uint64_t *dkeys, size_t n, uint8_t *dfound)
{
	table_settle(t);
	table_call_begin(t);
	if (n == 0)
		return table_call_end(t, CPHT_OK);
	return table_call_end(t, t->ops->resident->find(t, dkeys, n, dfound));
}
