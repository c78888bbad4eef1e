/*
 * call_stream.c — the stream of find-or-put batches (cpht_tableref_stream_*)
 * of a table in the cpht worker, a private one (worker_private.c) or a
 * shared one (shared_table.c): each batch runs as one call of its
 * placement when it is started, and its statuses wait until the next
 * finish hands them out.  Two buffers keep the statuses handed out at one
 * finish readable while the next batch runs.
 *
 * The buffers are malloc'd, as the stream itself is (cpht_tableref_stream_open);
 * running out of memory growing one raises 53200.
 */
#include "postgres.h"

#include "tableref/tableref_internal.h"

bool
cpht_call_stream_open(CphtTableRefStream *s)
{
	return true;
}

cpht_status
cpht_call_stream_start(CphtTableRefStream *s, const uint64 *keys, size_t n)
{
	int			b;
	cpht_status st;

	/* the buffer not handed out at the last finish */
	b = 1 - s->ready;
	if (s->cap[b] < n)
	{
		uint8	   *grown = realloc(s->status[b], n);

		if (grown == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		s->status[b] = grown;
		s->cap[b] = n;
	}
	st = s->table->ops->call(s->table, CPHT_CALL_FOP, keys, n, s->status[b], NULL);
	if (st != CPHT_OK)
		return st;
	s->inserted = 0;
	for (size_t i = 0; i < n; i++)
		s->inserted += s->status[b][i];
	s->ready = b;
	s->n = n;
	s->pending = true;
	return CPHT_OK;
}

cpht_status
cpht_call_stream_finish(CphtTableRefStream *s, const uint8 **status, size_t *n,
						uint64 *inserted)
{
	*status = s->pending ? s->status[s->ready] : NULL;
	*n = s->pending ? s->n : 0;
	*inserted = s->pending ? s->inserted : 0;
	s->pending = false;
	return CPHT_OK;
}

void
cpht_call_stream_close(CphtTableRefStream *s)
{
	free(s->status[0]);
	free(s->status[1]);
}
