/*
 * table.c — the table layer behind cpht_table.h: the choice of
 * implementation, creating and destroying tables, error messages, call
 * timing, the memory hook and the interrupt check.  Parameter checks and
 * sizing live in table_sizing.c; the rest of the layer (the same for the
 * CPU and the GPU) in the other table_*.c files; the algorithms in the
 * devices (cpu/, gpu/).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "table/table_layer.h"

static cpht_interrupt_fn interrupt_check = NULL;
static cpht_memory_fn memory_hook = NULL;

double
table_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The public batch calls time themselves (cpht_table_call_times). */
void
table_call_begin(cpht_table *t)
{
	memset(&t->times, 0, sizeof(t->times));
	t->times.total = table_clock_ms();
}

cpht_status
table_call_end(cpht_table *t, cpht_status rc)
{
	t->times.total = table_clock_ms() - t->times.total;
	t->span_keys = NULL;		/* cpht_table_expect_span: for one call */
	return rc;
}

void
cpht_table_call_times(const cpht_table *t, cpht_call_times *out)
{
	*out = t->times;
}

void
cpht_call_times_add(cpht_call_times *sum, const cpht_call_times *one)
{
	sum->total += one->total;
	sum->stage_in += one->stage_in;
	sum->wait += one->wait;
	sum->copy_out += one->copy_out;
	sum->undo_log += one->undo_log;
	sum->grow += one->grow;
	sum->grows += one->grows;
	sum->widen += one->widen;
	sum->widens += one->widens;
	sum->pieces += one->pieces;
	sum->exchange_in += one->exchange_in;
	sum->exchange_out += one->exchange_out;
	sum->routed |= one->routed;
	if (one->threads > sum->threads)
		sum->threads = one->threads;
}

void
cpht_set_interrupt_check(cpht_interrupt_fn fn)
{
	interrupt_check = fn;
}

void
cpht_set_memory_hook(cpht_memory_fn fn)
{
	memory_hook = fn;
}

int
table_memory_take(uint64_t bytes)
{
	return memory_hook == NULL || memory_hook((int64_t) bytes);
}

void
table_memory_give(uint64_t bytes)
{
	if (memory_hook != NULL && bytes > 0)
		(void) memory_hook(-(int64_t) bytes);
}

int
table_interrupted(void)
{
	return interrupt_check != NULL && interrupt_check();
}

cpht_status
table_fail(cpht_table *t, cpht_status code, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(t->errmsg, sizeof(t->errmsg), fmt, ap);
	va_end(ap);
	return code;
}

cpht_status
table_param_fail(char *errbuf, size_t errlen, cpht_status code, const char *fmt,...)
{
	va_list		ap;

	if (errbuf && errlen)
	{
		va_start(ap, fmt);
		vsnprintf(errbuf, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* ---- lifecycle ---------------------------------------------------------- */

cpht_status
table_single_create(const cpht_params *params, cpht_table **out,
					char *errbuf, size_t errlen)
{
	cpht_table *t;
	cpht_status rc;

	*out = NULL;
	t = calloc(1, sizeof(cpht_table));
	if (t == NULL)
		return table_param_fail(errbuf, errlen, CPHT_ERR_NOMEM, "out of host memory");
	t->params = *params;
	rc = table_resolve_layout(t, errbuf, errlen);
	if (rc != CPHT_OK)
	{
		free(t);
		return rc;
	}

	if (params->device == CPHT_DEVICE_GPU)
	{
#ifdef CPHT_WITH_GPU
		if (!cpht_gpu_usable(errbuf, errlen))
		{
			free(t);
			return CPHT_ERR_NODEVICE;
		}
		t->ops = &cpht_gpu_ops;
#else
		free(t);
		return table_param_fail(errbuf, errlen, CPHT_ERR_NODEVICE, "cpht was built without CUDA support");
#endif
	}
	else
		t->ops = &cpht_cpu_ops;

	rc = t->ops->create(t);
	if (rc != CPHT_OK)
	{
		table_param_fail(errbuf, errlen, rc, "%s", t->errmsg);
		free(t);
		return rc;
	}
	for (int l = 0; l < t->levels; l++)
		t->initial_slots += t->params.slots[l];
	*out = t;
	return CPHT_OK;
}

void
table_single_destroy(cpht_table *t)
{
	if (t == NULL)
		return;
	table_streams_detach(t);
	table_log_free(t);				/* a device's log store goes before the device state */
	t->ops->destroy(t);
	table_memory_give((uint64_t) t->grown_bytes);
	free(t->stash);
	free(t);
}

const char *
cpht_table_error(const cpht_table *t)
{
	return t->errmsg;
}

