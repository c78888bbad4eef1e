/*
 * cpu_device.c — the CPU device: its ops table (cpht_cpu_ops, declared in
 * table/device_ops.h), the slot memory of a table's levels, and what it
 * says of itself (name, memory, ordinal).  The operations are in
 * cpu_batches.c (find-or-put, find, erase over a batch), cpu_slot_copy.c
 * (slot copies, scan, revive) and cpu_grow.c (moving keys into a larger
 * table); the algorithms one key at a time in cpu_iceberg.c and
 * cpu_cuckoo.c.
 *
 * Slot memory comes from mmap (huge pages), zeroed (every slot EMPTY).  The
 * CPU has no log store and no pinned memory: the table layer keeps the undo
 * log in host memory.  Nothing here locks: the table layer serialises the
 * calls on one table, and a batch's threads share its slots only through
 * the atomics of cpu_slots.h.
 */
#include <stdio.h>
#include <sys/mman.h>

#include "cpu/cpu_device.h"

/*
 * Zeroed slot memory straight from the kernel, asking for transparent huge
 * pages: buckets are touched at random, so 4 kB pages cost a page fault per
 * page on first touch and a TLB miss on nearly every access.
 */
static void *
slots_alloc(uint64_t bytes)
{
	void	   *p;

	if (bytes != (size_t) bytes)
		return NULL;
	p = mmap(NULL, (size_t) bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	(void) madvise(p, (size_t) bytes, MADV_HUGEPAGE);
#endif
	return p;
}

static void
slots_free(layout_level *lv)
{
	if (lv->slots)
		munmap(lv->slots, (size_t) layout_level_bytes(lv));
	lv->slots = NULL;
}

static cpht_status
cpu_create(cpht_table *t)
{
	for (int l = 0; l < t->levels; l++)
	{
		layout_level *lv = &t->level[l];
		uint64_t	bytes = layout_level_bytes(lv);

		lv->slots = slots_alloc(bytes);
		if (lv->slots == NULL)
		{
			for (int k = 0; k < l; k++)
				slots_free(&t->level[k]);
			return table_fail(t, CPHT_ERR_NOMEM,
							  "could not allocate %llu bytes of host memory for level %d",
							  (unsigned long long) bytes, l + 1);
		}
	}
	return CPHT_OK;
}

static void
cpu_destroy(cpht_table *t)
{
	for (int l = 0; l < t->levels; l++)
		slots_free(&t->level[l]);
}

static void
cpu_device_name(cpht_table *t, char *buf, size_t len)
{
	snprintf(buf, len, "CPU (%d threads)", t->params.cpu_threads);
}

static uint64_t
cpu_staging_bytes(cpht_table *t)
{
	(void) t;
	return 0;
}

/* host memory: no device to report */
static void
cpu_device_memory(cpht_table *t, uint64_t *free_bytes, uint64_t *total_bytes)
{
	(void) t;
	*free_bytes = *total_bytes = 0;
}

static int
cpu_device_ordinal(cpht_table *t)
{
	(void) t;
	return -1;
}

/* No log store and no pinned memory: the table layer keeps the undo log
 * in host memory. */
const cpht_device_ops cpht_cpu_ops = {
	.name = "cpu",
	.create = cpu_create,
	.destroy = cpu_destroy,
	.find_or_put = cpu_find_or_put,
	.find = cpu_find,
	.erase = cpu_erase,
	.scan = cpu_scan,
	.device_name = cpu_device_name,
	.staging_bytes = cpu_staging_bytes,
	.copy_slots = cpu_copy_slots,
	.revive = cpu_revive,
	.write_slots = cpu_write_slots,
	.write_slot_bytes = cpu_write_slot_bytes,
	.slot_writes_wait = cpu_slot_writes_wait,
	.move_keys = cpu_move_keys,
	.copy_slot_range = cpu_copy_slot_range,
	.create_slots = cpu_create,
	.destroy_slots = cpu_destroy,
	.device_memory = cpu_device_memory,
	.device_ordinal = cpu_device_ordinal,
};
