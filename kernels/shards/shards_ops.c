/*
 * shards_ops.c — find-or-put, find, erase and undo on a sharded table, each
 * all or nothing: when a shard fails or an interrupt comes, the shards
 * that did their part are undone.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shards/shards_internal.h"

/* ---- the operations -------------------------------------------------------- */

/* Say so in the call's message when undoing shard s failed too. */
static void
undo_failed(cpht_table *t, int s)
{
	char		why[sizeof(t->errmsg)];

	memcpy(why, t->errmsg, sizeof(why));
	snprintf(t->errmsg, sizeof(t->errmsg), "%s; undoing shard %d of %d failed too: %s",
			 why, s + 1, t->sharded->nshards, cpht_table_error(t->sharded->shard[s]));
}

void
shards_log_mark(const cpht_table *t, shard_log_marks *marks)
{
	for (int s = 0; s < t->sharded->nshards; s++)
	{
		marks->len[s] = t->sharded->shard[s]->log_len;
		marks->cap[s] = t->sharded->shard[s]->log_cap;
	}
}

/* Every shard back to its log before a call that failed, and its log no
 * larger than it was (table_log_trim). */
static void
rollback_logs(cpht_table *t, const shard_log_marks *before)
{
	for (int s = 0; s < t->sharded->nshards; s++)
	{
		if (table_single_rollback_to(t->sharded->shard[s], before->len[s]) != CPHT_OK)
			undo_failed(t, s);
		else
			table_log_trim(t->sharded->shard[s], before->cap[s]);
	}
}

/*
 * A find-or-put stopped (shards_pipeline's stop, the error `rc` with its message
 * set) after the pieces before stop->done worked: undo every shard's part.
 * Shards that log go back to their log position before the call;
 * otherwise the keys the call put (status CPHT_PUT in the answers of the
 * pieces done, and in the failed piece's answers of the shards whose part
 * worked) are erased.
 */
cpht_status
shards_undo_find_or_put(cpht_table *t, const shard_job *jobs, const pipe_stop *stop,
				 const uint64_t *keys, uint8_t *status, const shard_log_marks *before,
				 cpht_status rc)
{
	size_t		ran = stop->done + stop->m;
	uint64_t   *put[CPHT_MAX_SHARDS] = {NULL};
	size_t		nput[CPHT_MAX_SHARDS] = {0};
	uint8_t    *gone;
	int			ok;

	/* The shards log alike (cpht_table_set_logging sets them all). */
	if (t->logging)
	{
		rollback_logs(t, before);
		return rc;
	}
	/* The failed piece's answers: where a shard failed, it undid itself. */
	if (stop->sp)
	{
		for (int f = 0; f < t->sharded->nshards; f++)
			if (jobs[f].rc != CPHT_OK)
				memset(stop->sp->out + stop->sp->off[f], CPHT_FOUND,
					   stop->sp->off[f + 1] - stop->sp->off[f]);
		shards_answers_back(t, stop->sp, stop->m, status + stop->done);
	}
	gone = malloc(ran ? ran : 1);
	ok = gone != NULL;
	for (int s = 0; s < t->sharded->nshards; s++)
		ok &= (put[s] = malloc((ran ? ran : 1) * sizeof(uint64_t))) != NULL;
	for (size_t i = 0; ok && i < ran; i++)
		if (status[i] == CPHT_PUT)
		{
			int			s = shard_route(keys[i], t->sharded->seed, t->sharded->nshards);

			put[s][nput[s]++] = keys[i];
		}
	for (int s = 0; s < t->sharded->nshards; s++)
	{
		if (!ok)
			(void) table_fail(t->sharded->shard[s], CPHT_ERR_NOMEM, "out of host memory while undoing %zu keys", ran);
		if (!ok || (nput[s] > 0 && table_single_erase(t->sharded->shard[s], put[s], nput[s], gone) != CPHT_OK))
			undo_failed(t, s);
		free(put[s]);
	}
	free(gone);
	return rc;
}

cpht_status
shards_find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	return t->sharded->path->find_or_put(t, keys, n, status);
}

cpht_status
shards_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	return t->sharded->path->find(t, keys, n, found);
}

/* The host path: the call split by shard on the host (shards_split.c). */
cpht_status
shards_host_find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	shard_log_marks before;
	shard_split bufs[SPLIT_BUFFERS];
	size_t		chunk = shards_split_chunk(t, n);
	pipe_stop	stop;
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	if (n > UINT32_MAX)
		return table_fail(t, CPHT_ERR_INVALID,
						  "a call on a sharded table takes at most %u keys, not %zu",
						  (unsigned) UINT32_MAX, n);
	rc = shards_segs_reserve(t);
	if (rc == CPHT_OK)
		rc = shards_splits_alloc(t, chunk, n, bufs);
	if (rc != CPHT_OK)
		return rc;
	shards_log_mark(t, &before);
	rc = shards_pipeline(t, OP_FIND_OR_PUT, keys, n, status, bufs, chunk, jobs, &stop);
	if (rc != CPHT_OK)
		rc = shards_undo_find_or_put(t, jobs, &stop, keys, status, &before, rc);
	else
		shards_segs_append(t, before.len);
	shards_splits_free(bufs);
	shards_settled(t, &stop);
	return rc;
}

cpht_status
shards_host_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	shard_split bufs[SPLIT_BUFFERS];
	size_t		chunk = shards_split_chunk(t, n);
	pipe_stop	stop;
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	rc = shards_splits_alloc(t, chunk, n, bufs);
	if (rc != CPHT_OK)
		return rc;
	rc = shards_pipeline(t, OP_FIND, keys, n, found, bufs, chunk, jobs, &stop);
	shards_splits_free(bufs);
	shards_settled(t, &stop);
	return rc;
}

/*
 * Erase.  A shard's erase that worked is undone by its log, so while the
 * table keeps none the shards log the call (and forget it after).
 */
cpht_status
shards_erase(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *present)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	shard_log_marks before;
	shard_split bufs[SPLIT_BUFFERS];
	size_t		chunk = shards_split_chunk(t, n);
	pipe_stop	stop;
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	rc = shards_segs_reserve(t);
	if (rc == CPHT_OK)
		rc = shards_splits_alloc(t, chunk, n, bufs);
	if (rc != CPHT_OK)
		return rc;
	for (int s = 0; s < t->sharded->nshards; s++)
		if (!t->logging)
			table_single_set_logging(t->sharded->shard[s], 1);
	shards_log_mark(t, &before);
	rc = shards_pipeline(t, OP_ERASE, keys, n, present, bufs, chunk, jobs, &stop);
	if (rc != CPHT_OK)
		rollback_logs(t, &before);
	else
		shards_segs_append(t, before.len);
	/* the log kept for this call alone goes, with what it grew: a table
	 * that does not log holds no log memory between calls */
	if (!t->logging)
		for (int s = 0; s < t->sharded->nshards; s++)
		{
			table_single_set_logging(t->sharded->shard[s], 0);
			table_log_trim(t->sharded->shard[s], before.cap[s]);
		}
	shards_splits_free(bufs);
	shards_settled(t, &stop);
	return rc;
}

/*
 * Undo entries read with log_read: each shard undoes its own, newest first,
 * so the pieces go from the last one back, one at a time (a rare path: a
 * transaction of a shared table rolled back).
 */
cpht_status
shards_undo(cpht_table *t, const uint64_t *keys, const uint8_t *where, size_t n)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	shard_split sp;
	size_t		chunk = shards_split_chunk(t, n);
	cpht_status rc;

	if (n == 0)
		return CPHT_OK;
	rc = shards_split_alloc(t, chunk, 1, 0, &sp);
	for (size_t hi = n; rc == CPHT_OK && hi > 0;)
	{
		size_t		m = hi < chunk ? hi : chunk;
		int			failed;

		shards_split_piece(t, keys + (hi - m), where + (hi - m), m, &sp);
		shards_run(t, jobs, OP_UNDO, &sp, m);
		failed = shards_failed(t, jobs);
		if (failed >= 0)
			rc = shards_fail(t, jobs, failed);
		hi -= m;
	}
	shards_split_free(&sp);
	shards_settled(t, NULL);
	return rc;
}
