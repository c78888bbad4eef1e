/*
 * shards_route.c — how a sharded table takes its calls: the path chosen
 * once, when the table is made (shards_choose_path).
 *
 * The host path (shards_ops.c) splits every call by shard on the host and
 * gives each shard its part; it serves CPU shards, and GPU shards whose
 * devices cannot reach each other's memory.  The device path routes a
 * find-or-put or find on the GPUs themselves (the device's cpht_route_ops,
 * kernels/gpu/gpu_route.cu): each GPU takes a slice of the batch by
 * position over its own link, partitions it by shard and stores every
 * shard's keys in that shard's GPU memory; each shard runs its call where
 * the keys arrived (table_single_*_resident), and each GPU reads its
 * keys' answers back from the shards.  The
 * host copies each key in once and each answer out once, where the host
 * path reads and writes every key and answer twice more.  A call the
 * device path cannot take as it is (a shard with stashed keys, an
 * automatic key width, a log in host memory, table_single_resident_ok)
 * goes the host path; erase and undo always do.
 *
 * A routed call goes in pieces as the host path's does, all or nothing
 * the same way: when a shard fails or an interrupt comes between pieces,
 * the pieces done (and the failed piece's shards whose part worked) are
 * undone by shards_undo_find_or_put.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shards/shards_internal.h"

/*
 * Keys per GPU of a piece of a routed call, at most: a piece takes up to
 * this many keys times the GPUs (the first pieces are smaller,
 * cpht_route_piece).  A piece's fixed costs are a few synchronisations of
 * every GPU and a thread per shard (0.2-0.3 ms measured on 4 H200s, so a
 * piece should keep each GPU busy for a few ms), its buffers 26 + 18 N
 * bytes a key of this per GPU (1.0 GB on each of 2 GPUs, 1.6 GB on each
 * of 4); the upload of the next piece runs under the shards' work on this
 * one.
 */
#define ROUTE_SLICE_KEYS ((size_t) 1 << 24)

static const shard_path host_path = {"host", shards_host_find_or_put, shards_host_find};

/* Keys per piece: as the host path for a small table (so that its pieces
 * stay its size), up to ROUTE_SLICE_KEYS a GPU for a large one. */
static size_t
route_chunk(const cpht_table *t, size_t n)
{
	uint64_t	slots = 0;
	size_t		most,
				piece = ROUTE_SLICE_KEYS * (size_t) t->sharded->nshards;

	for (int s = 0; s < t->sharded->nshards; s++)
		for (int l = 0; l < t->sharded->shard[s]->levels; l++)
			slots += t->sharded->shard[s]->params.slots[l];
	most = slots < ((size_t) 1 << 16) ? ((size_t) 1 << 16) :
		slots > piece ? piece : (size_t) slots;
	return n < most ? n : most;
}

/* Whether every shard takes a call on its device's memory now. */
static int
route_ok(const cpht_table *t)
{
	for (int s = 0; s < t->sharded->nshards; s++)
		if (!table_single_resident_ok(t->sharded->shard[s]))
			return 0;
	return 1;
}

typedef struct route_job
{
	cpht_table *sub;
	shard_op	op;
	const uint64_t *dkeys;
	size_t		n;
	uint8_t    *dout;
	cpht_status rc;
	double		ms;				/* the shard's call */
	pthread_t	thread;
	int			started;
} route_job;

static void *
route_shard_main(void *arg)
{
	route_job  *j = arg;
	double		mark = table_clock_ms();

	if (j->op == OP_FIND_OR_PUT)
		j->rc = table_single_find_or_put_resident(j->sub, j->dkeys, j->n, j->dout);
	else
		j->rc = table_single_find_resident(j->sub, j->dkeys, j->n, j->dout);
	j->ms = table_clock_ms() - mark;
	return NULL;
}

/*
 * The pipeline of a routed call.  Returns CPHT_OK with every answer in
 * answer[], or the error (its message set) with stop->done: the keys
 * [0, done) ran and have their answers (a failed shard's part of the last
 * piece reads CPHT_FOUND: it undid itself).  While the shards work on
 * piece i, piece i + 1 is routed and sent to them, and then piece i + 3
 * goes up into the slices piece i + 1 left; after them, piece i's answers
 * go back (their copy to the host runs on under the next piece).  So the
 * uploads follow one another without a gap, and the exchange runs under
 * the shards' work.  On 4 H200s, 200M keys, that overlap was faster in
 * every case (all new 2.46-2.53x one GPU serial against 2.74-2.78x; all
 * found 2.52-2.55x against 2.62-2.64x).  With the radix sort that routing
 * used before, 2 H100s had measured it slower for finds (23.1 against
 * 19.5 ms): the sort took the memory bandwidth the shards' kernels need.
 */
static cpht_status
route_pipeline(cpht_table *t, shard_op op, const uint64_t *keys, size_t n, uint8_t *answer,
			   shard_job *jobs, pipe_stop *stop, double *ms)
{
	const cpht_route_ops *ro = t->sharded->route;
	void	   *r = t->sharded->router;
	int			ns = t->sharded->nshards;
	size_t		chunk = route_chunk(t, n);
	size_t		pieces = 0;
	size_t		got[2][CPHT_MAX_SHARDS];
	uint64_t   *dkeys[2][CPHT_MAX_SHARDS];
	uint8_t    *dout[2][CPHT_MAX_SHARDS];
	cpht_status rc;

	/* the call's pieces (cpht_route_piece): up to the first empty one */
	for (size_t len = 1; len > 0;)
	{
		(void) cpht_route_piece(chunk, n, pieces, &len);
		if (len > 0)
			pieces++;
	}
	memset(stop, 0, sizeof(*stop));
	for (int s = 0; s < ns; s++)
	{
		memset(&jobs[s], 0, sizeof(jobs[s]));
		jobs[s].t = t;
		jobs[s].s = s;
		jobs[s].op = op;
	}
	rc = ro->begin(r, t, keys, n, answer, chunk, t->sharded->split_threads);
	if (rc == CPHT_OK)
		rc = ro->scatter(r, t, 0, got[0], dkeys[0], dout[0]);
	if (rc == CPHT_OK && pieces > 2)
		rc = ro->prefetch(r, t, 2);
	for (size_t i = 0; rc == CPHT_OK && i < pieces; i++)
	{
		int			b = (int) (i & 1);
		size_t		m;
		size_t		lo = cpht_route_piece(chunk, n, i, &m);
		route_job	rj[CPHT_MAX_SHARDS];
		sigset_t	all,
					saved;
		cpht_status next = CPHT_OK;
		int			failed;
		double		slowest = 0;

		stop->done = lo;
		if (i > 0 && table_interrupted())
			return table_fail(t, CPHT_ERR_CANCELED, "canceled after %zu of %zu keys", lo, n);
		stop->pieces++;
		/* the shards' threads block all signals: the host process handles them */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &saved);
		for (int s = 0; s < ns; s++)
		{
			rj[s] = (route_job) {t->sharded->shard[s], op, dkeys[b][s], got[b][s], dout[b][s], CPHT_OK};
			rj[s].started = pthread_create(&rj[s].thread, NULL, route_shard_main, &rj[s]) == 0;
		}
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
		/* piece i + 1 to its shards meanwhile; once its slices are read,
		 * piece i + 3 may go up into their place */
		if (i + 1 < pieces)
			next = ro->scatter(r, t, i + 1, got[!b], dkeys[!b], dout[!b]);
		if (next == CPHT_OK && i + 3 < pieces)
			next = ro->prefetch(r, t, i + 3);
		for (int s = 0; s < ns; s++)
		{
			if (rj[s].started)
				pthread_join(rj[s].thread, NULL);
			else
				route_shard_main(&rj[s]);
			jobs[s].rc = rj[s].rc;
			slowest = rj[s].ms > slowest ? rj[s].ms : slowest;
		}
		/* the shards' time: the slowest shard's call of each piece */
		ms[0] += slowest;
		failed = shards_failed(t, jobs);
		if (failed >= 0)
		{
			cpht_status frc;

			/* a failed shard undid its part: its keys were not put */
			for (int s = 0; s < ns; s++)
				if (jobs[s].rc != CPHT_OK && op == OP_FIND_OR_PUT)
					(void) t->sharded->shard[s]->ops->resident->fill(t->sharded->shard[s], dout[b][s],
																	 CPHT_FOUND, got[b][s]);
			frc = shards_fail(t, jobs, failed);
			if (op == OP_FIND_OR_PUT)
			{
				char		why[sizeof(t->errmsg)];

				memcpy(why, t->errmsg, sizeof(why));
				if (ro->gather(r, t, i) == CPHT_OK && ro->finish(r, t) == CPHT_OK)
				{
					memcpy(t->errmsg, why, sizeof(why));
					stop->done = lo + m;
				}
				else
					snprintf(t->errmsg, sizeof(t->errmsg),
							 "%s (the answers of its last piece could not be read back, so keys of it may remain)",
							 why);
			}
			return frc;
		}
		rc = ro->gather(r, t, i);
		if (rc == CPHT_OK && i + 1 == pieces)
			rc = ro->finish(r, t);
		if (rc != CPHT_OK)
		{
			size_t		len = strlen(t->errmsg);

			snprintf(t->errmsg + len, sizeof(t->errmsg) - len,
					 " (the answers of a piece could not be read back, so keys of it may remain)");
			return rc;
		}
		stop->done = lo + m;
		rc = next;
	}
	return rc;
}

/* After a failed routed call: nothing of the router may still run when
 * the call returns; the call's error stays the one reported. */
static void
route_drain(cpht_table *t)
{
	char		why[sizeof(t->errmsg)];

	memcpy(why, t->errmsg, sizeof(why));
	(void) t->sharded->route->finish(t->sharded->router, t);
	memcpy(t->errmsg, why, sizeof(why));
}

/* After a routed call: the call's times (cpht_call_times). */
static void
route_settled(cpht_table *t, const pipe_stop *stop, double shards_ms)
{
	double		in,
				exchange,
				back,
				out;

	shards_settled(t, stop);
	t->sharded->route->times(t->sharded->router, &in, &exchange, &back, &out);
	t->times.stage_in = in;
	t->times.exchange_in = exchange;
	t->times.wait = shards_ms;
	t->times.exchange_out = back;
	t->times.copy_out = out;
	t->times.routed = 1;
}

static cpht_status
device_find_or_put(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *status)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	shard_log_marks before;
	pipe_stop	stop;
	double		shards_ms = 0;
	cpht_status rc;

	if (n == 0 || n > UINT32_MAX || !route_ok(t))
		return shards_host_find_or_put(t, keys, n, status);
	rc = shards_segs_reserve(t);
	if (rc != CPHT_OK)
		return rc;
	shards_log_mark(t, &before);
	rc = route_pipeline(t, OP_FIND_OR_PUT, keys, n, status, jobs, &stop, &shards_ms);
	if (rc != CPHT_OK)
	{
		size_t		answered;

		route_drain(t);
		answered = t->sharded->route->answered(t->sharded->router);
		/*
		 * Undoing without a log reads the answers of the keys done: only
		 * those that surely came down count (a failed copy down leaves
		 * stale bytes that could erase keys that were there before).
		 */
		if (!t->logging && stop.done > answered)
		{
			size_t		len = strlen(t->errmsg);

			stop.done = answered;
			stop.m = 0;
			snprintf(t->errmsg + len, sizeof(t->errmsg) - len,
					 " (answers of %zu keys did not come back, so keys of them may remain)",
					 n - stop.done);
		}
		rc = shards_undo_find_or_put(t, jobs, &stop, keys, status, &before, rc);
	}
	else
		shards_segs_append(t, before.len);
	route_settled(t, &stop, shards_ms);
	return rc;
}

static cpht_status
device_find(cpht_table *t, const uint64_t *keys, size_t n, uint8_t *found)
{
	shard_job	jobs[CPHT_MAX_SHARDS];
	pipe_stop	stop;
	double		shards_ms = 0;
	cpht_status rc;

	if (n == 0 || !route_ok(t))
		return shards_host_find(t, keys, n, found);
	rc = route_pipeline(t, OP_FIND, keys, n, found, jobs, &stop, &shards_ms);
	if (rc != CPHT_OK)
		route_drain(t);
	route_settled(t, &stop, shards_ms);
	return rc;
}

static const shard_path device_path = {"device", device_find_or_put, device_find};

void
shards_choose_path(cpht_table *t)
{
	const cpht_device_ops *ops = t->sharded->shard[0]->ops;
	char		why[256];

	t->sharded->path = &host_path;
	if (ops->route == NULL || ops->resident == NULL)
		return;
	t->sharded->router = ops->route->create(t->sharded->shard, t->sharded->nshards, t->sharded->seed,
											 why, sizeof(why));
	if (t->sharded->router == NULL)
		return;
	t->sharded->route = ops->route;
	t->sharded->path = &device_path;
	/*
	 * The routing buffers for the table's largest pieces, made now as the
	 * shards' own memory is: the first call need not wait for them.  When
	 * they cannot be made (the memory limit), that first call makes them
	 * and fails the same way.
	 */
	if (ops->route->prepare &&
		ops->route->prepare(t->sharded->router, t, route_chunk(t, SIZE_MAX)) != CPHT_OK)
		t->errmsg[0] = '\0';
}

void
shards_use_host_path(cpht_table *t)
{
	shards_drop_path(t);
	t->sharded->path = &host_path;
}

void
shards_drop_path(cpht_table *t)
{
	if (t->sharded->router)
		t->sharded->route->destroy(t->sharded->router);
	t->sharded->router = NULL;
	t->sharded->route = NULL;
}
