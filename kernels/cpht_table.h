/*
 * cpht_table.h — door of the kernels' tables: the one interface between
 * the PostgreSQL side (src/) and the table algorithms (kernels/).  Plain
 * C: no PostgreSQL types, no CUDA types.  Every operation is batch
 * oriented and works on host arrays of 64-bit key patterns.  Behind it,
 * kernels/table/ holds what is the same on both devices and reaches a
 * device through its ops table (table/device_ops.h): the CPU one
 * (kernels/cpu/) or the GPU one (kernels/gpu/); both use the layout
 * arithmetic of table/layout.h, so a table built on either answers
 * identically.  A sharded table (kernels/shards/) is several such tables
 * behind the same calls.
 *
 * Offers: tables (lifecycle, batch operations, streams, the undo log,
 * images, sizing, stats, the export scan) and the two process-wide hooks
 * (interrupt check, memory hook); it includes cpht_gpu.h and cpht_util.h.
 *
 * Who: anyone.  src/ includes this header, cpht_gpu.h and cpht_util.h and
 * nothing else of kernels/ (test/check-layout.sh keeps it so).  The
 * tables run in whatever process calls them: a backend (its private
 * tables, unless they live in the worker), the cpht worker, a unit test.
 * A CPU table never touches CUDA.
 *
 * Locking: a table is not thread safe; its owner calls it from one thread
 * at a time, except that its streams run a batch on a helper thread and
 * every other call waits for that batch.  Distinct tables may run on
 * distinct threads at once (a sharded table's shards do); what they share
 * is process-wide: the hooks, the host thread pool (util/) and each GPU's
 * context, which a sticky fault breaks for every GPU table of the process
 * (CPHT_ERR_DEVICE_LOST).  Set the hooks before the first table call
 * (they are plain stores, read by every thread).  A long call asks the
 * interrupt check between chunks, possibly on a helper thread (so it must
 * only read a flag), and stops with the call undone (CPHT_ERR_CANCELED).
 * Helper threads block every signal.  Nothing here raises, longjmps or
 * calls back into the host's error handling: a call returns a
 * cpht_status, with the message in the table (cpht_table_error) or the
 * caller's errbuf; a failed batch operation is undone, as the calls below
 * say.  Memory is the C library's or the device's, never the host's
 * allocator; for undo logs and a GPU table's buffers and growth the
 * memory hook is asked first.
 */
#ifndef CPHT_TABLE_H
#define CPHT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "cpht_util.h"			/* cpht_key_span */
/*
 * The GPU door comes along so that a caller of the tables needs one
 * include; a file that wants only the GPUs includes cpht_gpu.h alone.
 */
#include "cpht_gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cpht_kind
{
	CPHT_ICEBERG = 0,			/* two-level compact iceberg, lockless find-or-put */
	CPHT_CUCKOO = 1				/* compact bucketed cuckoo, bulk put + sort-based fop */
} cpht_kind;

typedef enum cpht_device
{
	CPHT_DEVICE_CPU = 0,
	CPHT_DEVICE_GPU = 1
} cpht_device;

/* What a call returns.  Anything but CPHT_OK leaves a message in the table
 * (cpht_table_error) or in the caller's buffer (cpht_table_create). */
typedef enum cpht_status
{
	CPHT_OK = 0,
	CPHT_ERR_FULL,				/* a key found no slot; the call was undone */
	CPHT_ERR_NOMEM,				/* host or device memory exhausted */
	CPHT_ERR_INVALID,			/* bad parameters */
	CPHT_ERR_NODEVICE,			/* GPU requested but none usable */
	CPHT_ERR_DEVICE,			/* a device call failed (message has details) */
	CPHT_ERR_CANCELED,			/* the interrupt check asked to stop; undone */
	CPHT_ERR_LIMIT,				/* the memory hook refused an allocation; undone */
	CPHT_ERR_DEVICE_LOST		/* a sticky device fault (illegal address, launch
								 * failure, ECC): the GPU's context is unusable
								 * for every table of the process */
} cpht_status;

/* Per-key outcome of find_or_put (one byte per key). */
enum
{
	CPHT_FOUND = 0,				/* key was already present */
	CPHT_PUT = 1,				/* key was inserted by this call */
	CPHT_FULL = 2				/* no slot for the key (only inside a failing call) */
};

#define CPHT_MAX_LEVELS 2
#define CPHT_CUCKOO_CHOICES 3	/* hash choices of the cuckoo table */
#define CPHT_ICEBERG_CHOICES 2	/* secondary-bucket choices of the iceberg table */
#define CPHT_AUTO_KEY_BITS_START 8	/* key_bits of a new auto_key_bits table */

/*
 * Creation parameters.  cpht_params_for_capacity() fills them from a
 * capacity; benchmarks set them by hand.
 *
 * slots[l] is the number of slots of level l; it must be bucket_slots[l]
 * times the number of buckets (at least 8, any number: layout.h splits
 * keys by division where it is no power of two).  The cuckoo table has one
 * level.  slot_bits[l] is 16, 32 or 64, or 0 for the smallest that holds the
 * remainder plus its state bits.
 */
typedef struct cpht_params
{
	cpht_kind	kind;
	cpht_device device;
	int			key_bits;		/* 8..64: keys satisfy 0 <= k < 2^key_bits
								 * (with auto_key_bits: the width of the
								 * widest key stored so far, see below) */
	int			auto_key_bits;	/* 1: any 64-bit key; the table widens its
								 * key_bits (and its slots) when a key
								 * needs more (cpht_table_widen) */
	int			signed_keys;	/* 1: keys are zigzag-folded before the
								 * layout (layout.h), so that negative keys
								 * of small magnitude stay narrow; widths
								 * are those of the folded keys.  An
								 * auto_key_bits table turns it on at its
								 * first negative key. */
	uint64_t	seed;			/* selects the permutations */
	uint64_t	slots[CPHT_MAX_LEVELS];
	int			bucket_slots[CPHT_MAX_LEVELS];	/* 8, 16 or 32 */
	int			slot_bits[CPHT_MAX_LEVELS];
	int			cpu_threads;	/* CPU implementation: 0 = one per core */
	int			max_evictions;	/* cuckoo: bound on an eviction chain, 0 = default */
	int			fixed_size;		/* 1: never grow; a key that finds no slot
								 * fails the call with CPHT_ERR_FULL */
	int			shards;			/* 0 or 1: one table; 2..CPHT_MAX_SHARDS:
								 * the keys are split by a hash of the key
								 * over that many tables (shards), each with
								 * 1/shards of the slots, on the GPUs in
								 * turn (see gpu) or all on the CPU */
	int			gpu;			/* GPU tables: which of the GPUs cpht uses
								 * (0 .. cpht_gpu_count() - 1, taken modulo
								 * it); shard s of a sharded table goes to
								 * gpu + s */
} cpht_params;

#define CPHT_MAX_SHARDS 16

/* One shard of a sharded table, as cpht_table_stats reports it. */
typedef struct cpht_shard_stats
{
	cpht_device device;
	int			gpu;			/* the GPU's CUDA ordinal; -1 on the CPU */
	uint64_t	count;			/* distinct keys in this shard */
	uint64_t	slots;			/* slots of all levels */
	uint64_t	live;			/* occupied slots of all levels */
	uint64_t	table_bytes;
	uint64_t	grows;
} cpht_shard_stats;

/* What cpht_info reports. */
typedef struct cpht_stats
{
	cpht_kind	kind;
	cpht_device device;
	int			key_bits;
	int			levels;
	uint64_t	slots[CPHT_MAX_LEVELS];
	int			bucket_slots[CPHT_MAX_LEVELS];
	int			slot_bits[CPHT_MAX_LEVELS];
	uint64_t	live[CPHT_MAX_LEVELS];		/* occupied slots per level */
	uint64_t	tombstones[CPHT_MAX_LEVELS];	/* deleted slots per level */
	uint64_t	stashed;		/* cuckoo keys kept outside the buckets */
	uint64_t	log_entries;	/* undo log length */
	uint64_t	log_bytes;		/* memory held by the undo log (device
								 * memory for a GPU table) */
	uint64_t	count;			/* distinct keys stored */
	uint64_t	table_bytes;	/* bytes of slot memory (host or device) */
	uint64_t	staging_bytes;	/* transfer buffers held for the table */
	uint64_t	device_free_bytes;	/* GPU tables: the device's free and */
	uint64_t	device_total_bytes; /* total memory (0 for CPU tables) */
	char		device_name[128];
	uint64_t	grows;			/* times the table grew */
	double		last_grow_ms;	/* how long the last growth took */
	int64_t		last_grow_at_us;	/* when it ended: microseconds since the
									 * Unix epoch, 0 if it never grew */
	uint64_t	initial_slots;	/* slots of all levels at creation */
	int			auto_key_bits;	/* key_bits is widened as keys need */
	int			signed_keys;	/* keys are folded (cpht_params) */
	int			slot_key_bits;	/* the widest key the slots hold now */
	uint64_t	widens;			/* times the key width grew */
	double		last_widen_ms;	/* how long the last widening took */
	int			shards;			/* 1 for a table of one shard; else the
								 * figures above are sums over the shards
								 * (slot_bits the widest) and shard[] has
								 * each one */
	cpht_shard_stats shard[CPHT_MAX_SHARDS];
} cpht_stats;

typedef struct cpht_table cpht_table;

/*
 * Where the last find-or-put, find, put or delete on a table spent its
 * time, in milliseconds (cpht.trace reports it).  total is the whole call;
 * for a GPU table, stage_in is copying keys into pinned memory, wait is
 * waiting for transfers and kernels, copy_out is copying results out of
 * pinned memory; undo_log is keeping the undo log on the host; grow is
 * growing the table (moving its keys into a larger layout) inside the call,
 * and grows how many times it grew; widen and widens the same for widening
 * its keys (cpht_table_widen).  For a sharded table (find-or-put and
 * find and erase), stage_in is the calling thread splitting the batch by
 * shard, copy_out its putting the answers back in order, and wait its
 * waiting for the shards' calls (run at once, on threads of their own,
 * while it splits the next piece and puts the last one's answers back);
 * pieces is how many pieces the call went in and threads how many threads
 * split them; undo_log and grow are the longest shard's, grows the
 * shards' sum.  A sharded table's find-or-put or find routed on its GPUs
 * (routed = 1, docs/sharding.md) reports instead: stage_in the keys going
 * onto the GPUs (staging and the part of the uploads not hidden),
 * exchange_in routing them on the GPUs and sending each to its shard's
 * GPU, wait the shards' own calls, exchange_out the answers going back
 * to the GPUs the keys came from, copy_out the answers coming off the
 * GPUs.
 */
typedef struct cpht_call_times
{
	double		total;
	double		stage_in;
	double		wait;
	double		copy_out;
	double		undo_log;
	double		grow;
	int			grows;
	double		widen;
	int			widens;
	int			pieces;
	int			threads;
	/* a sharded table's call routed on its GPUs (routed = 1): routing and
	 * sending the keys to their shards' GPUs, and the answers back */
	double		exchange_in;
	double		exchange_out;
	int			routed;
} cpht_call_times;

void		cpht_table_call_times(const cpht_table *table, cpht_call_times *out);
/* Adds one call's times to a sum over several calls. */
void		cpht_call_times_add(cpht_call_times *sum, const cpht_call_times *one);

/*
 * Lifecycle.  create validates the parameters, allocates zeroed slot memory
 * and returns CPHT_OK with *out set, or an error with a message in errbuf.
 */
cpht_status cpht_table_create(const cpht_params *params, cpht_table **out,
							  char *errbuf, size_t errlen);
void		cpht_table_destroy(cpht_table *table);

/*
 * Batch operations.  keys[0..n) are 64-bit patterns already checked against
 * key_bits by the caller.  A failing find_or_put or put (full table, device
 * fault, interrupt) leaves the table as it was before the call: no key of
 * the call stays.
 *
 * Growth.  Unless params.fixed_size is set, a find_or_put or put that finds
 * the table past its kind's safe fill, or that runs out of room, grows the
 * table (cpht_table_grow) and goes on; the answers are those of a table
 * large enough from the start.  The call then fails only where growth
 * does: CPHT_ERR_LIMIT (the memory hook refused the larger layout),
 * CPHT_ERR_NOMEM, a device fault, or CPHT_ERR_FULL when no larger layout
 * exists for the key width (the bucket address would take every key bit,
 * or the table would pass the largest cpht addresses).
 *
 * find_or_put: status[i] = CPHT_FOUND or CPHT_PUT; a key repeated inside the
 *   batch is CPHT_PUT exactly once (at one of its occurrences, not always
 *   the first) when it was absent.
 * find:        found[i] = 1 if present, else 0.
 * put:         inserts the absent keys, *inserted = how many.
 * erase:       present[i] = 1 if the key was present and is now deleted
 *   (a tombstone takes its slot); a key repeated in the batch is reported
 *   present at one occurrence only.
 */
cpht_status cpht_table_find_or_put(cpht_table *table, const uint64_t *keys,
								   size_t n, uint8_t *status);
cpht_status cpht_table_find(cpht_table *table, const uint64_t *keys,
							size_t n, uint8_t *found);
cpht_status cpht_table_put(cpht_table *table, const uint64_t *keys,
						   size_t n, uint64_t *inserted);
cpht_status cpht_table_erase(cpht_table *table, const uint64_t *keys,
							 size_t n, uint8_t *present);

/*
 * Streams: find-or-put overlapped with the caller, for streaming ingests.
 * cpht_stream_start copies a batch and runs it on a helper thread while the
 * caller collects the next one; cpht_stream_finish waits for it and hands
 * out its per-key status (valid until the stream's next finish, so the next
 * batch may be started before it is read) and how many keys it inserted.
 * Each stream has its own buffers, so several streams may share a table;
 * the table runs one batch at a time and every other call on it waits for
 * the running one.  Once the table is destroyed its streams only fail
 * (CPHT_ERR_INVALID) and must still be closed.  finish with nothing started
 * returns CPHT_OK and *n = 0.
 */
typedef struct cpht_stream cpht_stream;

cpht_stream *cpht_stream_open(cpht_table *table);	/* NULL: out of memory */
cpht_status cpht_stream_start(cpht_stream *stream, const uint64_t *keys, size_t n);
cpht_status cpht_stream_finish(cpht_stream *stream, const uint8_t **status,
							   size_t *n, uint64_t *inserted);
void		cpht_stream_close(cpht_stream *stream);

/*
 * Undo log, for transactional tables.  While logging is on, every key a
 * call inserts or deletes is recorded in order; a position in the log marks
 * a savepoint.  rollback_to undoes everything recorded after the position
 * (newest first: inserted keys are deleted, deleted keys inserted again)
 * and forgets it; truncate forgets entries after the position without
 * undoing them (a commit).  A deleted key goes back into the very slot it
 * was deleted from, so a rollback needs no free space: it fails only for
 * host memory or a device fault.  When everything undone was an insert, an
 * iceberg table gets its slots back as EMPTY, bit for bit as it was;
 * otherwise undone inserts leave tombstones.
 */
void		cpht_table_set_logging(cpht_table *table, int on);
uint64_t	cpht_table_log_position(cpht_table *table);
cpht_status cpht_table_rollback_to(cpht_table *table, uint64_t position);
void		cpht_table_truncate_log(cpht_table *table, uint64_t position);

/*
 * An emptied log gives a large store back (host or device memory), so
 * that a finished transaction holds none; a table whose log is emptied
 * after every call (the cpht worker's shared tables) keeps a store of up
 * to `entries` instead, which spares the next call of that size allocating
 * it again.  0 (the default): give back any store over 64K entries.
 */
void		cpht_table_keep_log(cpht_table *table, uint64_t entries);

/*
 * Undo kept by the caller, for a table that many transactions change at
 * once (the cpht worker's transactional shared tables), where rolling the
 * single log back to a position would undo other transactions too.  The
 * caller reads each call's entries out of the log and truncates it; later
 * it undoes one transaction's entries alone, whatever others did in
 * between to other keys.
 *
 * log_read: entries [position, position + n): keys[i], and where[i] 0 for
 *   an inserted key or nonzero (its place) for a deleted one.
 * hold_deletes: the caller keeps `delta` more (negative: fewer) deleted
 *   entries read out: their tombstones stay reserved, as for deleted keys
 *   in the log, and rebuild is refused while it keeps any.
 * undo: entries read with log_read, newest (n - 1) first: an inserted key
 *   is taken out (a tombstone takes its slot), a deleted key goes back into
 *   its place.  Needs no free space; fails only for host memory or a
 *   device fault.  If the table grew while deletes were held, their places
 *   are gone: until the caller holds none, deleted keys go back by a plain
 *   put, which may grow the table again (and so may also fail for the
 *   memory hook).  The caller then holds fewer deletes (hold_deletes).
 */
cpht_status cpht_table_log_read(cpht_table *table, uint64_t position, uint64_t n,
								uint64_t *keys, uint8_t *where);
void		cpht_table_hold_deletes(cpht_table *table, int64_t delta);
cpht_status cpht_table_undo(cpht_table *table, const uint64_t *keys,
							const uint8_t *where, size_t n);

uint64_t	cpht_table_count(cpht_table *table);

/*
 * Rebuild the table in place: tombstones are gone afterwards (except those
 * of keys deleted inside the running transaction, which a rollback puts
 * back), keys move up to earlier buckets where room opened, and stashed
 * cuckoo keys go into the buckets where they find room.  It never needs
 * more slots than the table has, so it fails only for host memory (a host
 * copy of the slots), a device fault or an interrupt (checked while it
 * works, CPHT_ERR_CANCELED); on failure the table is unchanged.
 */
cpht_status cpht_table_rebuild(cpht_table *table);

/*
 * Grow the table to the next larger layout (twice as many buckets per
 * level): a new slot array on the
 * table's device (memory asked of the memory hook first), every key moved
 * into it there (the GPU moves them with kernels; no key passes through
 * the host), the old slots freed.  The undo log stays valid: the places of
 * logged deletes are moved with their tombstones.  Stashed keys stay in
 * the stash.  On failure the table is unchanged.
 */
cpht_status cpht_table_grow(cpht_table *table);

/*
 * Widen an auto_key_bits table so that it holds keys of key_bits bits
 * (folded ones with signed_keys; signed_keys only turns on): where its
 * slots hold such keys already only key_bits changes; otherwise the keys
 * move into slots of the wider layout (same buckets) as for a growth, on
 * the table's device, with the same memory rules and undo-log handling.
 * find_or_put and put widen by themselves before they run when a key of
 * the batch needs it; find and erase answer absent for keys wider than
 * the table.  On failure the table is unchanged.
 */
cpht_status cpht_table_widen(cpht_table *table, int key_bits, int signed_keys);
cpht_status cpht_table_stats(cpht_table *table, cpht_stats *out);

/* Bytes of slot memory the table has now (more than at creation once it
 * grew): stats' table_bytes, without counting slots. */
uint64_t	cpht_table_slot_bytes(cpht_table *table);

/*
 * Reading every key out (export), a piece at a time, in bounded memory.
 * A scan position runs from 0 to cpht_table_scan_end(): the slots of each
 * level in turn, then the stash.  scan_keys reads at most `max` positions
 * from *position on (slots on the GPU are copied to the host a range at a
 * time), writes the live keys among them to keys[0..*n) (so *n <= max) and
 * advances *position.  The keys come in slot order, not sorted.
 *
 * A scan spread over several calls sees one state of the table only if
 * nothing changed it in between: cpht_table_changes() counts the calls that
 * changed the keys or their places (puts, deletes, rollbacks, growth,
 * rebuild; a find or a find-or-put that inserted nothing does not count),
 * so a caller compares it at the start and the end of its scan.
 */
cpht_status cpht_table_scan_keys(cpht_table *table, uint64_t *position,
								 uint64_t *keys, size_t max, size_t *n);
uint64_t	cpht_table_scan_end(cpht_table *table);
uint64_t	cpht_table_changes(cpht_table *table);
/*
 * Sharded tables (params.shards > 1) take every call above with the same
 * meaning as one table: a call's keys are split by shard, the shards run
 * their parts at the same time (one host thread each) and the answers come
 * back in the order of the keys.  A call fails whole: the shards whose part
 * worked are undone when another fails.  One call takes at most
 * UINT32_MAX keys.  Log positions count the entries of all shards.
 */
/*
 * Images, for saving a table and restoring it (the cpht worker's durable
 * tables): the parameters that define the layout (slot counts and widths
 * resolved, the seed, the device), the counts, each level's raw slot
 * array and the cuckoo stash.  Slot arrays move by a copy between the
 * table's memory (host, or device by cudaMemcpy) and host memory.
 *
 * image_info: fails (CPHT_ERR_INVALID) unless the undo log is empty, i.e.
 *   between calls with the log truncated.
 * image_read_level: level_bytes[level] bytes into host.
 * image_read_stash: nstash keys into keys.
 * from_image: a new table of info->params (its device included, which the
 *   caller may change before) whose slots are copied from levels[l]
 *   (level_bytes[l] bytes each) and whose stash is `stash`; checks that
 *   the parameters give exactly the image's layout.  Fails like
 *   cpht_table_create (no device, no memory on it), or CPHT_ERR_INVALID
 *   for an image that does not fit its parameters; the message is in
 *   errbuf.  The table is not logging.
 *
 * A restore that reads the image from a file a piece at a time:
 * image_begin: the new table of info->params, checked like from_image,
 *   with its slots still empty (same failures).
 * image_buffer, image_buffer_free: host memory the table's device copies
 *   from without staging (pinned on the GPU; NULL when none is left).
 * image_write: copies `bytes` from host to level `level`'s slot array at
 *   byte `offset`.  On the GPU the copy may still run when it returns: host
 *   stays untouched until image_wait, whose return also reports the copy's
 *   failure; so a caller reads the next piece into another buffer
 *   meanwhile.
 * image_wait: every image_write is done.
 * image_finish: after the last image_write, the stash and counts; on
 *   failure (message in errbuf) the caller destroys the table.
 *
 * image_slots_from_v1: converts `bytes` of slots `slot_bits` wide, in host
 *   memory, from version 1 of the slot encoding (layout.h), in place: what
 *   a reader of images saved in that encoding applies before image_write.
 */
typedef struct cpht_image_info
{
	cpht_params params;
	int			levels;
	uint64_t	count;
	uint64_t	nstash;
	uint64_t	level_bytes[CPHT_MAX_LEVELS];
	uint64_t	grows;
	uint64_t	initial_slots;
	uint64_t	widens;
} cpht_image_info;

cpht_status cpht_table_image_info(cpht_table *table, cpht_image_info *out);
cpht_status cpht_table_image_read_level(cpht_table *table, int level, void *host);
void		cpht_table_image_read_stash(cpht_table *table, uint64_t *keys);
cpht_status cpht_table_from_image(const cpht_image_info *info, const void *const *levels,
								  const uint64_t *stash, cpht_table **out,
								  char *errbuf, size_t errlen);
cpht_status cpht_table_image_begin(const cpht_image_info *info, cpht_table **out,
								   char *errbuf, size_t errlen);
void	   *cpht_table_image_buffer(cpht_table *table, size_t bytes);
void		cpht_table_image_buffer_free(cpht_table *table, void *p);
cpht_status cpht_table_image_write(cpht_table *table, int level, uint64_t offset,
								   const void *host, uint64_t bytes);
cpht_status cpht_table_image_wait(cpht_table *table);
cpht_status cpht_table_image_finish(cpht_table *table, const cpht_image_info *info,
									const uint64_t *stash, char *errbuf, size_t errlen);
void		cpht_image_slots_from_v1(void *slots, uint64_t bytes, int slot_bits);

/* Message of the last failed call on this table. */
const char *cpht_table_error(const cpht_table *table);

/*
 * Interrupts.  A long find-or-put runs in chunks and, between chunks, asks
 * this function (process-wide; NULL = never) whether to stop.  If it says
 * yes the call undoes what it did and returns CPHT_ERR_CANCELED.  The
 * function must only read a flag: it may run on a helper thread.
 */
typedef int (*cpht_interrupt_fn) (void);
void		cpht_set_interrupt_check(cpht_interrupt_fn fn);

/*
 * Memory accounting.  Before the kernels grow an undo log (host or device
 * memory), or allocate a GPU table's transfer buffers (pinned host and
 * device memory, at create) or grow its device scratch area, they ask
 * this function (process-wide; NULL = always yes) with
 * the bytes they are about to add; if it returns 0 the call fails with
 * CPHT_ERR_LIMIT and, like any failing call, leaves the table as before.  When such memory is freed, or
 * its allocation failed after the hook said yes, they call it with the
 * negative amount (its answer is then ignored).  It may run on a stream's
 * helper thread, so it must not call back into the host process's error
 * handling.
 */
typedef int (*cpht_memory_fn) (int64_t delta_bytes);
void		cpht_set_memory_hook(cpht_memory_fn fn);

/*
 * Sizing policy: parameters for a table that holds `capacity` distinct keys
 * at a fill the kind reaches with margin.  key_bits 0: an auto_key_bits
 * table, starting at the narrowest width (CPHT_AUTO_KEY_BITS_START).
 * Returns CPHT_ERR_INVALID with a
 * message when capacity or key_bits is out of range, CPHT_ERR_NOMEM when
 * the capacity is beyond any table cpht can address.
 */
cpht_status cpht_params_for_capacity(cpht_kind kind, uint64_t capacity,
									 int key_bits, cpht_params *out,
									 char *errbuf, size_t errlen);

/* Bytes of slot memory a table with these parameters needs (after
 * resolving slot_bits 0), or 0 when the parameters are invalid. */
uint64_t	cpht_params_table_bytes(const cpht_params *params);

/*
 * Shards for a table of these parameters (one table: shards 0 or 1) that
 * would not fit one GPU with `gpu_bytes` of room, when `gpus` GPUs are
 * used: the fewest N of 2..min(gpus, CPHT_MAX_SHARDS) whose shards' slots
 * each fit in gpu_bytes, or that largest N when none does (creating the
 * table then fails for room, as one table would).  1 when the table fits
 * one GPU, when only one GPU is used, or for invalid parameters.
 */
int			cpht_shards_to_fit(const cpht_params *params, uint64_t gpu_bytes, int gpus);

/*
 * The next call on the table (find-or-put, find, put or erase) whose keys
 * are exactly keys[0..n) takes *span as their span instead of reading them.
 * The span must be that of those keys: a narrower one would let keys the
 * slots cannot hold into the table.  Any call ends it.
 */
void		cpht_table_expect_span(cpht_table *table, const uint64_t *keys, size_t n,
								   const cpht_key_span *span);

#ifdef __cplusplus
}
#endif

#endif							/* CPHT_TABLE_H */
