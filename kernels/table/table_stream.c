/*
 * table_stream.c — streams: find-or-put batches run on a helper thread while
 * the caller collects the next batch (cpht_stream_* in cpht_table.h).
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "table/table_layer.h"

/*
 * A stream owns its buffers.  Two sets alternate: batch k uses set k % 2, so
 * the status of batch k, handed out by cpht_stream_finish, stays intact
 * while batch k + 1 runs.  A table runs at most one batch at a time (any
 * stream's); every call on the table first waits for it (table_settle).
 */
typedef struct stream_buffers
{
	uint64_t   *keys;			/* owned copy of the batch */
	uint8_t    *status;
	size_t		cap;
} stream_buffers;

struct cpht_stream
{
	cpht_table *t;				/* NULL once the table is destroyed */
	cpht_stream *next;			/* the table's list of open streams */
	stream_buffers buf[2];
	int			cur;			/* the set of the latest batch */
	int			has_result;		/* a batch was started and not finished */
	cpht_status rc;
	size_t		n;
	uint64_t	inserted;
	char		errmsg[sizeof(((cpht_table *) 0)->errmsg)];
};
static void *
stream_main(void *arg)
{
	cpht_stream *s = arg;

	/* timed like a public call: cpht.trace sums a stream's batches */
	table_call_begin(s->t);
	s->rc = table_call_end(s->t, table_find_or_put_counted(s->t, s->buf[s->cur].keys, s->n,
														   s->buf[s->cur].status, &s->inserted));
	if (s->rc != CPHT_OK)
		memcpy(s->errmsg, s->t->errmsg, sizeof(s->errmsg));
	return NULL;
}

/* Wait for the table's running batch, if any; its stream keeps the result. */
void
table_settle(cpht_table *t)
{
	if (t->running)
	{
		pthread_join(t->runner, NULL);
		t->running = 0;
	}
}

cpht_stream *
cpht_stream_open(cpht_table *t)
{
	cpht_stream *s = calloc(1, sizeof(cpht_stream));

	if (s == NULL)
		return NULL;
	s->t = t;
	s->next = t->streams;
	t->streams = s;
	return s;
}

void
cpht_stream_close(cpht_stream *s)
{
	if (s == NULL)
		return;
	if (s->t)
	{
		cpht_stream **p;

		table_settle(s->t);
		for (p = &s->t->streams; *p; p = &(*p)->next)
			if (*p == s)
			{
				*p = s->next;
				break;
			}
	}
	for (int i = 0; i < 2; i++)
	{
		free(s->buf[i].keys);
		free(s->buf[i].status);
	}
	free(s);
}

cpht_status
cpht_stream_start(cpht_stream *s, const uint64_t *keys, size_t n)
{
	cpht_table *t = s->t;
	stream_buffers *b;
	sigset_t	all,
				saved;

	if (t == NULL)
		return CPHT_ERR_INVALID;
	table_settle(t);
	s->cur = 1 - s->cur;
	b = &s->buf[s->cur];
	if (n > b->cap)
	{
		uint64_t   *k = realloc(b->keys, n * sizeof(uint64_t));
		uint8_t    *st = k ? realloc(b->status, n) : NULL;

		if (k)
			b->keys = k;
		if (st)
			b->status = st;
		if (!k || !st)
			return table_fail(t, CPHT_ERR_NOMEM, "out of host memory for a batch of %zu keys", n);
		b->cap = n;
	}
	memcpy(b->keys, keys, n * sizeof(uint64_t));
	s->n = n;
	s->has_result = 1;
	s->inserted = 0;

	/* The helper thread blocks all signals: the host process handles them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	t->running = pthread_create(&t->runner, NULL, stream_main, s) == 0;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (!t->running)
		stream_main(s);			/* no thread to be had: run it here */
	return CPHT_OK;
}

cpht_status
cpht_stream_finish(cpht_stream *s, const uint8_t **status, size_t *n, uint64_t *inserted)
{
	*status = NULL;
	*n = 0;
	*inserted = 0;
	if (s->t == NULL)
		return CPHT_ERR_INVALID;
	table_settle(s->t);
	if (!s->has_result)
		return CPHT_OK;
	s->has_result = 0;
	if (s->rc != CPHT_OK)
	{
		memcpy(s->t->errmsg, s->errmsg, sizeof(s->errmsg));
		return s->rc;
	}
	*status = s->buf[s->cur].status;
	*n = s->n;
	*inserted = s->inserted;
	return CPHT_OK;
}

/* The table goes away: wait for its batch and cut its streams loose. */
void
table_streams_detach(cpht_table *t)
{
	table_settle(t);
	for (cpht_stream *s = t->streams; s; s = s->next)
		s->t = NULL;
	t->streams = NULL;
}
