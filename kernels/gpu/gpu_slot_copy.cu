/*
 * gpu_slot_copy.cu — moving a level's slots between device and host for a
 * rebuild or an image, and a range of them to the host for an export.
 */
#include "gpu/gpu_ops.h"

cpht_status
gpu_copy_level(cpht_table *t, int level, void *host)
{
	gpu_state  *st = gpu_state_of(t);
	const layout_level *lv = &t->level[level];
	size_t		bytes = (size_t) (lv->buckets * (uint64_t) lv->bucket_slots * (uint64_t) (lv->slot_bits / 8));

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	GPU_TRY(t, cudaMemcpyAsync(host, lv->slots, bytes, cudaMemcpyDeviceToHost, st->comp),
			"copying slots to the host");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "copying slots to the host");
	return CPHT_OK;
}

cpht_status
gpu_copy_slot_range(cpht_table *t, int level, uint64_t first, uint64_t count, void *host)
{
	gpu_state  *st = gpu_state_of(t);
	const layout_level *lv = &t->level[level];
	size_t		width = (size_t) (lv->slot_bits / 8);

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	GPU_TRY(t, cudaMemcpyAsync(host, (const char *) lv->slots + (size_t) first * width,
							   (size_t) count * width, cudaMemcpyDeviceToHost, st->comp),
			"copying slots to the host");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "copying slots to the host");
	return CPHT_OK;
}

cpht_status
gpu_write_level(cpht_table *t, int level, const void *host)
{
	gpu_state  *st = gpu_state_of(t);
	const layout_level *lv = &t->level[level];
	size_t		bytes = (size_t) (lv->buckets * (uint64_t) lv->bucket_slots * (uint64_t) (lv->slot_bits / 8));

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	GPU_TRY(t, cudaMemcpyAsync(lv->slots, host, bytes, cudaMemcpyHostToDevice, st->comp),
			"copying slots to the device");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "copying slots to the device");
	return CPHT_OK;
}

cpht_status
gpu_write_slot_bytes(cpht_table *t, int level, uint64_t offset, const void *host, uint64_t bytes)
{
	gpu_state  *st = gpu_state_of(t);

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	GPU_TRY(t, cudaMemcpyAsync((char *) t->level[level].slots + offset, host, (size_t) bytes,
							   cudaMemcpyHostToDevice, st->comp),
			"copying slots to the device");
	return CPHT_OK;
}

cpht_status
gpu_slot_writes_wait(cpht_table *t)
{
	gpu_state  *st = gpu_state_of(t);

	GPU_TRY(t, cudaSetDevice(st->device), "selecting the device");
	GPU_TRY(t, cudaStreamSynchronize(st->comp), "copying slots to the device");
	return CPHT_OK;
}
