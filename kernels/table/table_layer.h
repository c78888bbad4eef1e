/*
 * table/table_layer.h — what the files of the table layer (kernels/table/)
 * share among themselves, and the one-table calls (table_single_*) a
 * sharded table (kernels/shards/) runs on its shards.  The devices do not
 * see it: they meet the layer in device_ops.h.  Only table_api.c knows of
 * shards: it routes a sharded table's public calls to shards/shards.h
 * (and table_find_or_put_counted takes either); everything else here works
 * on one table.
 *
 * Who: table/'s own files, and shards/ (test/check-layout.sh); never
 * cpu/, gpu/ or src/.
 *
 * Concurrency: as cpht_table.h says of a table: one thread at a time per
 * table (its owner's, a stream's helper thread, or a shard's thread inside
 * a sharded call), and no lock of its own.  The table_single_* calls that
 * read or change a table wait for its running stream batch first
 * (table_settle), and the batch calls time themselves, as the public calls
 * do.  The functions return a status with the message in t->errmsg (or in
 * errbuf while creating), never raise, and ask the memory hook and the
 * interrupt check as device_ops.h says.
 */
#ifndef CPHT_TABLE_LAYER_H
#define CPHT_TABLE_LAYER_H

#include "table/device_ops.h"

/* table.c: timing of the public calls and the interrupt check */
double		table_clock_ms(void);
void		table_call_begin(cpht_table *t);
cpht_status table_call_end(cpht_table *t, cpht_status rc);
/* table.c: printf into errbuf (when given) a parameter's or creation's
 * failure; returns `code` */
cpht_status table_param_fail(char *errbuf, size_t errlen, cpht_status code, const char *fmt,...)
#ifdef __GNUC__
			__attribute__((format(printf, 4, 5)))
#endif
			;
/* table_sizing.c: level geometry of t from t->params (slot widths resolved) */
cpht_status table_resolve_layout(cpht_table *t, char *errbuf, size_t errlen);
/* table_sizing.c: the kind's levels (its policy's make_levels) for at least
 * `primary` primary buckets that take the fewest bytes (more buckets where
 * that narrows the slots) */
void		table_size_levels(cpht_params *p, double primary);
/* table_sizing.c: the widest key (folded with signed_keys) the slots hold */
int			table_slot_key_bits(const cpht_table *t);

/* table_grow.c: past the kind's safe fill (its policy's grow_fill: growth
 * starts past it) */
int			table_past_safe_fill(const cpht_table *t);
/* grow: by half again, or to room for min_keys at the safe fill if more */
cpht_status table_grow(cpht_table *t, uint64_t min_keys);
/* relayout: move the keys into the layout of np (more buckets, or wider
 * keys when widen is set), the undo log kept valid; the table keeps its
 * layout on failure */
cpht_status table_relayout(cpht_table *t, const cpht_params *np, int widen);

/* table_widen.c: automatic key width.  widen_for widens t for every key of
 * a batch it is about to store; keys_fit says whether every key is within
 * the table's width (a wider one is absent); key_fits one key */
cpht_status table_widen_for(cpht_table *t, const uint64_t *keys, size_t n);
int			table_keys_fit(const cpht_table *t, const uint64_t *keys, size_t n);
int			table_key_fits(const cpht_table *t, uint64_t key, int held);


/* table_stream.c: wait for a stream's running batch; cut streams loose */
void		table_settle(cpht_table *t);
void		table_streams_detach(cpht_table *t);

/* table_stash.c: sorted key arrays and the cuckoo stash */
int			table_cmp_u64(const void *a, const void *b);
int			table_in_sorted(const uint64_t *v, size_t n, uint64_t key);
cpht_status table_stash_add(cpht_table *t, const uint64_t *keys, size_t n);
int			table_stash_remove(cpht_table *t, uint64_t key);

/* table_log.c: the undo log's store and runs */
int			table_log_on_device(const cpht_table *t);
void		table_log_free(cpht_table *t);
cpht_status table_log_reserve(cpht_table *t, uint64_t pending, uint64_t extra);
void		table_log_trim(cpht_table *t, uint64_t cap);
cpht_status table_log_reserve_where(cpht_table *t, uint64_t extra);
void		table_log_mark(cpht_table *t, int deleted, uint64_t added);
void		table_log_append(cpht_table *t, const uint64_t *keys, size_t n,
							 const uint8_t *flags, uint8_t which, int deleted,
							 uint64_t matches);

/* Every logged delete whose key left a tombstone in the buckets (not the
 * stash), oldest first: its key, place byte and index in log_where.
 * Reading the keys of a log kept by the device needs host memory
 * (CPHT_ERR_NOMEM; `what` names the operation in the message). */
typedef void (*table_log_delete_fn) (void *arg, uint64_t key, uint8_t where,
									 uint64_t where_at);
cpht_status table_log_each_bucket_delete(cpht_table *t, table_log_delete_fn fn,
										 void *arg, const char *what);

/* table_rollback.c: take a failed call's keys out again; put deleted keys
 * back where they were */
cpht_status table_undo_call(cpht_table *t, const uint64_t *keys, size_t n,
							const uint8_t *status, uint64_t *homeless,
							size_t nhomeless);
cpht_status table_put_back(cpht_table *t, const uint64_t *keys,
						   const uint8_t *where, size_t n);

/* table_ops.c: the operations, for rebuild, streams and rollback */
cpht_status table_find_or_put_in_buckets(cpht_table *t, const uint64_t *keys,
										 size_t n, uint8_t *status);
cpht_status table_find_or_put(cpht_table *t, const uint64_t *keys, size_t n,
							  uint8_t *status);
/* table_api.c: find-or-put on any table, sharded or not, telling how
 * many keys it inserted (a stream's batch, table_stream.c) */
cpht_status table_find_or_put_counted(cpht_table *t, const uint64_t *keys,
									  size_t n, uint8_t *status,
									  uint64_t *inserted);
cpht_status table_erase_keys(cpht_table *t, const uint64_t *keys, size_t n,
							 uint8_t *present);

/*
 * One table's public calls (table_api.c routes cpht_table_* here for a
 * table that is not sharded; the shards, each one table, are called
 * through these too).  Each means what its cpht_table_* says in
 * cpht_table.h, and the batch calls time themselves as those do.
 */
cpht_status table_single_create(const cpht_params *params, cpht_table **out,
								char *errbuf, size_t errlen);
uint64_t	table_single_bytes(const cpht_params *params);
void		table_single_destroy(cpht_table *t);
cpht_status table_single_find_or_put(cpht_table *t, const uint64_t *keys, size_t n,
									 uint8_t *status);
cpht_status table_single_find(cpht_table *t, const uint64_t *keys, size_t n,
							  uint8_t *found);
cpht_status table_single_put(cpht_table *t, const uint64_t *keys, size_t n,
							 uint64_t *inserted);
cpht_status table_single_erase(cpht_table *t, const uint64_t *keys, size_t n,
							   uint8_t *present);
void		table_single_set_logging(cpht_table *t, int on);
void		table_single_keep_log(cpht_table *t, uint64_t entries);
void		table_single_truncate_log(cpht_table *t, uint64_t position);
cpht_status table_single_log_read(cpht_table *t, uint64_t position, uint64_t n,
								  uint64_t *keys, uint8_t *where);
void		table_single_hold_deletes(cpht_table *t, int64_t delta);
cpht_status table_single_rollback_to(cpht_table *t, uint64_t position);
cpht_status table_single_undo(cpht_table *t, const uint64_t *keys,
							  const uint8_t *where, size_t n);
cpht_status table_single_rebuild(cpht_table *t);
cpht_status table_single_grow(cpht_table *t);
cpht_status table_single_stats(cpht_table *t, cpht_stats *out);
uint64_t	table_single_slot_bytes(cpht_table *t);
uint64_t	table_single_scan_end(cpht_table *t);
uint64_t	table_single_changes(cpht_table *t);
cpht_status table_single_scan_keys(cpht_table *t, uint64_t *position, uint64_t *keys,
								   size_t max, size_t *n);

/*
 * table_resident.c: find-or-put and find on keys already in the table's
 * device memory (a sharded table routing a call over its GPUs); answers
 * into device memory.  resident_ok says whether the table takes such calls
 * now (a device with resident_ops, no stash, a fixed key width, no log in
 * host memory); the sharded table asks before each call and otherwise
 * splits the call on the host.
 */
int			table_single_resident_ok(const cpht_table *t);
cpht_status table_single_find_or_put_resident(cpht_table *t, const uint64_t *dkeys, size_t n,
											  uint8_t *dstatus);
cpht_status table_single_find_resident(cpht_table *t, const uint64_t *dkeys, size_t n,
									   uint8_t *dfound);

#endif							/* CPHT_TABLE_LAYER_H */
