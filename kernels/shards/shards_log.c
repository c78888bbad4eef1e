/*
 * shards_log.c — the combined undo log of a sharded table: every shard
 * keeps its own log; the segments say which shard holds each stretch of
 * the whole, so a position converts to one per shard.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shards/shards_internal.h"

/* ---- the combined log ------------------------------------------------------ */

/* Room for one segment per shard, before a call that logs. */
cpht_status
shards_segs_reserve(cpht_table *t)
{
	size_t		want = t->sharded->log_nsegs + (size_t) t->sharded->nshards;

	if (!t->logging || want <= t->sharded->log_segs_cap)
		return CPHT_OK;
	{
		size_t		cap = t->sharded->log_segs_cap ? 2 * t->sharded->log_segs_cap : 64;
		shard_log_seg *grown;

		while (cap < want)
			cap *= 2;
		grown = realloc(t->sharded->log_segs, cap * sizeof(shard_log_seg));
		if (grown == NULL)
			return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for the undo log");
		t->sharded->log_segs = grown;
		t->sharded->log_segs_cap = cap;
	}
	return CPHT_OK;
}

/* A call added each shard's entries from before[s] on: append them. */
void
shards_segs_append(cpht_table *t, const uint64_t *before)
{
	if (!t->logging)
		return;
	for (int s = 0; s < t->sharded->nshards; s++)
	{
		uint64_t	added = t->sharded->shard[s]->log_len - before[s];
		shard_log_seg *last = t->sharded->log_nsegs ? &t->sharded->log_segs[t->sharded->log_nsegs - 1] : NULL;

		if (added == 0)
			continue;
		if (last == NULL || last->shard != s ||
			last->shard_start + (t->log_len - last->start) != before[s])
		{
			t->sharded->log_segs[t->sharded->log_nsegs].start = t->log_len;
			t->sharded->log_segs[t->sharded->log_nsegs].shard = s;
			t->sharded->log_segs[t->sharded->log_nsegs].shard_start = before[s];
			t->sharded->log_nsegs++;
		}
		t->log_len += added;
	}
}

static uint64_t
seg_end(const cpht_table *t, size_t i)
{
	return i + 1 < t->sharded->log_nsegs ? t->sharded->log_segs[i + 1].start : t->log_len;
}

/* Shard s's log length when the combined log was `position` long. */
static uint64_t
shard_position(const cpht_table *t, int s, uint64_t position)
{
	uint64_t	at = 0;

	for (size_t i = 0; i < t->sharded->log_nsegs && t->sharded->log_segs[i].start < position; i++)
	{
		const shard_log_seg *g = &t->sharded->log_segs[i];
		uint64_t	end = seg_end(t, i);

		if (g->shard == s)
			at = g->shard_start + (end < position ? end : position) - g->start;
	}
	return at;
}

/* The combined log ends at position (position < log_len). */
static void
segs_cut(cpht_table *t, uint64_t position)
{
	while (t->sharded->log_nsegs > 0 && t->sharded->log_segs[t->sharded->log_nsegs - 1].start >= position)
		t->sharded->log_nsegs--;
	t->log_len = position;
}

void
shards_set_logging(cpht_table *t, int on)
{
	for (int s = 0; s < t->sharded->nshards; s++)
		table_single_set_logging(t->sharded->shard[s], on);
	if (!on)
	{
		t->sharded->log_nsegs = 0;
		t->log_len = 0;
	}
	t->logging = on;
}

cpht_status
shards_rollback_to(cpht_table *t, uint64_t position)
{
	cpht_status rc = CPHT_OK;
	int			failed = -1;

	if (position >= t->log_len)
		return CPHT_OK;
	/* A failure keeps the segments: another rollback to the same position
	 * finds the shards already done with nothing left to undo. */
	for (int s = 0; s < t->sharded->nshards; s++)
	{
		cpht_status r = table_single_rollback_to(t->sharded->shard[s], shard_position(t, s, position));

		if (r != CPHT_OK && failed < 0)
		{
			failed = s;
			rc = table_fail(t, r, "shard %d of %d: %s", s + 1, t->sharded->nshards,
							cpht_table_error(t->sharded->shard[s]));
		}
	}
	if (rc == CPHT_OK)
		segs_cut(t, position);
	shards_settled(t, NULL);
	return rc;
}

void
shards_truncate_log(cpht_table *t, uint64_t position)
{
	if (position >= t->log_len)
		return;
	for (int s = 0; s < t->sharded->nshards; s++)
		table_single_truncate_log(t->sharded->shard[s], shard_position(t, s, position));
	segs_cut(t, position);
}

cpht_status
shards_log_read(cpht_table *t, uint64_t position, uint64_t n,
					  uint64_t *keys, uint8_t *where)
{
	if (position > t->log_len || n > t->log_len - position)
		return table_fail(t, CPHT_ERR_INVALID, "log entries %llu to %llu are past the log's %llu",
						  (unsigned long long) position, (unsigned long long) (position + n),
						  (unsigned long long) t->log_len);
	for (size_t i = 0; i < t->sharded->log_nsegs; i++)
	{
		const shard_log_seg *g = &t->sharded->log_segs[i];
		uint64_t	end = seg_end(t, i);
		uint64_t	lo = g->start > position ? g->start : position;
		uint64_t	hi = end < position + n ? end : position + n;
		cpht_status rc;

		if (lo >= hi)
			continue;
		rc = table_single_log_read(t->sharded->shard[g->shard], g->shard_start + (lo - g->start), hi - lo,
								 keys + (lo - position), where + (lo - position));
		if (rc != CPHT_OK)
			return table_fail(t, rc, "shard %d of %d: %s", g->shard + 1, t->sharded->nshards,
							  cpht_table_error(t->sharded->shard[g->shard]));
	}
	return CPHT_OK;
}

/*
 * The caller does not say which shard the deletes it holds came from, so
 * every shard holds them all: each keeps its tombstones (and refuses a
 * rebuild) while any delete of the table is held, and a shard that grows
 * meanwhile puts its deleted keys back by a plain put, which is right for
 * any key.
 */
void
shards_hold_deletes(cpht_table *t, int64_t delta)
{
	if (delta < 0 && (uint64_t) -delta > t->held_deletes)
		t->held_deletes = 0;
	else
		t->held_deletes += (uint64_t) delta;
	for (int s = 0; s < t->sharded->nshards; s++)
		table_single_hold_deletes(t->sharded->shard[s],
								(int64_t) t->held_deletes - (int64_t) t->sharded->shard[s]->held_deletes);
}


/* the logs are the shards': each keeps a store of that size (a call's keys
 * need not split evenly) */
void
shards_keep_log(cpht_table *t, uint64_t entries)
{
	for (int s = 0; s < t->sharded->nshards; s++)
		table_single_keep_log(t->sharded->shard[s], entries);
	t->log_keep = entries;
}
