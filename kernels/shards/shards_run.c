/*
 * shards_run.c — the shards of a call at work: a thread per shard, the
 * pipeline of a call's pieces, which shard failed and how the call's
 * times add up.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shards/shards_internal.h"

/* ---- running the shards ---------------------------------------------------- */



static void *
shard_main(void *arg)
{
	shard_job  *j = arg;
	cpht_table *sub = j->t->sharded->shard[j->s];
	size_t		lo = j->sp ? j->sp->off[j->s] : 0;
	size_t		m = j->sp ? j->sp->off[j->s + 1] - lo : 0;

	switch (j->op)
	{
		case OP_FIND_OR_PUT:
			j->rc = table_single_find_or_put(sub, j->sp->keys + lo, m, j->sp->out + lo);
			break;
		case OP_FIND:
			j->rc = table_single_find(sub, j->sp->keys + lo, m, j->sp->out + lo);
			break;
		case OP_ERASE:
			j->rc = table_single_erase(sub, j->sp->keys + lo, m, j->sp->out + lo);
			break;
		case OP_UNDO:
			j->rc = table_single_undo(sub, j->sp->keys + lo, j->sp->bytes + lo, m);
			break;
		case OP_REBUILD:
			j->rc = table_single_rebuild(sub);
			break;
		case OP_GROW:
			j->rc = table_single_grow(sub);
			break;
	}
	return NULL;
}

/*
 * Start op on every shard: shards `first` and after on threads of their
 * own, the others run by shards_wait on the calling thread (first =
 * nshards: all of them).
 */
static void
shards_start(cpht_table *t, shard_job *jobs, shard_op op, shard_split *sp, int first)
{
	sigset_t	all,
				saved;

	for (int s = 0; s < t->sharded->nshards; s++)
	{
		memset(&jobs[s], 0, sizeof(jobs[s]));
		jobs[s].t = t;
		jobs[s].s = s;
		jobs[s].op = op;
		jobs[s].sp = sp;
	}
	if (first >= t->sharded->nshards)
		return;
	/* The helper threads block all signals: the host process handles them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	for (int s = first; s < t->sharded->nshards; s++)
		jobs[s].started = pthread_create(&jobs[s].thread, NULL, shard_main, &jobs[s]) == 0;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

/* Every shard's part is done: those without a thread run here. */
static void
shards_wait(cpht_table *t, shard_job *jobs)
{
	for (int s = 0; s < t->sharded->nshards; s++)
		if (!jobs[s].started)
			shard_main(&jobs[s]);
	for (int s = 0; s < t->sharded->nshards; s++)
		if (jobs[s].started)
			pthread_join(jobs[s].thread, NULL);
}

/* Shards run on threads of their own where it pays: on GPUs always, on
 * the CPU for parts of many keys. */
static int
shards_threaded(const cpht_table *t, size_t n)
{
	return t->params.device == CPHT_DEVICE_GPU || n >= CPU_PARALLEL_KEYS;
}

/* Run op on every shard and wait for them. */
void
shards_run(cpht_table *t, shard_job *jobs, shard_op op, shard_split *sp, size_t n)
{
	shards_start(t, jobs, op, sp, shards_threaded(t, n) ? 1 : t->sharded->nshards);
	shards_wait(t, jobs);
}

/* The failed shard whose error the call reports (a lost device first), or -1. */
int
shards_failed(const cpht_table *t, const shard_job *jobs)
{
	int			worst = -1;

	for (int s = 0; s < t->sharded->nshards; s++)
		if (jobs[s].rc != CPHT_OK &&
			(worst < 0 || (jobs[s].rc == CPHT_ERR_DEVICE_LOST && jobs[worst].rc != CPHT_ERR_DEVICE_LOST)))
			worst = s;
	return worst;
}

cpht_status
shards_fail(cpht_table *t, const shard_job *jobs, int s)
{
	cpht_table *sub = t->sharded->shard[s];
	int			gpu = sub->ops->device_ordinal(sub);

	if (gpu >= 0)
		return table_fail(t, jobs[s].rc, "shard %d of %d (GPU %d): %s", s + 1, t->sharded->nshards,
						  gpu, cpht_table_error(sub));
	return table_fail(t, jobs[s].rc, "shard %d of %d: %s", s + 1, t->sharded->nshards,
					  cpht_table_error(sub));
}


cpht_status
shards_pipeline(cpht_table *t, shard_op op, const uint64_t *keys, size_t n, uint8_t *answer,
		 shard_split *bufs, size_t chunk, shard_job *jobs, pipe_stop *stop)
{
	size_t		pieces = (n + chunk - 1) / chunk;
	/* a call of one piece has nothing to overlap: shard 0 runs here */
	int			first = !shards_threaded(t, n) ? t->sharded->nshards : pieces > 1 ? 0 : 1;
	double		mark = table_clock_ms();

	memset(stop, 0, sizeof(*stop));
	shards_split_piece(t, keys, NULL, n < chunk ? n : chunk, &bufs[0]);
	stop->ms[0] += table_clock_ms() - mark;
	for (size_t i = 0; i < pieces; i++)
	{
		size_t		lo = i * chunk;
		size_t		m = n - lo < chunk ? n - lo : chunk;
		shard_split *cur = &bufs[i % 2],
				   *other = &bufs[(i + 1) % 2];
		int			failed;

		if (i > 0 && table_interrupted())
		{
			/* piece i-1 ran: its answers first, for the undo */
			shards_answers_back(t, other, chunk, answer + lo - chunk);
			stop->done = lo;
			return table_fail(t, CPHT_ERR_CANCELED, "canceled after %zu of %zu keys", lo, n);
		}
		shards_start(t, jobs, op, cur, first);
		stop->pieces++;
		if (i > 0)
		{
			mark = table_clock_ms();
			shards_answers_back(t, other, chunk, answer + lo - chunk);
			stop->ms[2] += table_clock_ms() - mark;
		}
		if (i + 1 < pieces)
		{
			mark = table_clock_ms();
			shards_split_piece(t, keys + lo + chunk, NULL, n - lo - chunk < chunk ? n - lo - chunk : chunk,
						other);
			stop->ms[0] += table_clock_ms() - mark;
		}
		mark = table_clock_ms();
		shards_wait(t, jobs);
		stop->ms[1] += table_clock_ms() - mark;
		failed = shards_failed(t, jobs);
		if (failed >= 0)
		{
			stop->done = lo;
			stop->m = m;
			stop->sp = cur;
			return shards_fail(t, jobs, failed);
		}
		if (i + 1 == pieces)
		{
			mark = table_clock_ms();
			shards_answers_back(t, cur, m, answer + lo);
			stop->ms[2] += table_clock_ms() - mark;
		}
	}
	stop->done = n;
	return CPHT_OK;
}

/* After a call: the count and call times of the whole table (stage_in,
 * wait and copy_out are the calling thread's own: splitting, waiting for
 * the shards after its own work, putting the answers back). */
void
shards_settled(cpht_table *t, const pipe_stop *stop)
{
	double		total = t->times.total;

	t->count = 0;
	memset(&t->times, 0, sizeof(t->times));
	t->times.total = total;
	for (int s = 0; s < t->sharded->nshards; s++)
	{
		const cpht_call_times *c = &t->sharded->shard[s]->times;

		t->count += t->sharded->shard[s]->count;
#define SHARD_MAX(f) if (c->f > t->times.f) t->times.f = c->f
		SHARD_MAX(undo_log);
		SHARD_MAX(grow);
#undef SHARD_MAX
		t->times.grows += c->grows;
	}
	if (stop)
	{
		t->times.stage_in = stop->ms[0];
		t->times.wait = stop->ms[1];
		t->times.copy_out = stop->ms[2];
		t->times.pieces = stop->pieces;
		t->times.threads = t->sharded->split_threads;
	}
}

