/*
 * table/layout.h — the door of the layout arithmetic: how a key becomes a
 * bucket address and a remainder and back, how a slot encodes it, and the
 * sizes of a level's slots; the design follows below.
 *
 * Who: table/, and shards/, cpu/ and gpu/ (test/check-layout.sh; also
 * through table/device_ops.h); never src/.  Both devices compile these
 * same functions, so a table built on either answers identically.
 *
 * Concurrency: pure functions of their arguments (CPHT_HD: static inline
 * in C, __host__ __device__ under nvcc), with no state, no allocation and
 * no failure: safe on any host thread and in any GPU kernel.
 */
/*
 * The layout arithmetic shared by the CPU and GPU implementations:
 * the key permutations, the split of a permuted key into bucket address and
 * remainder, and the slot encoding.  Written once; compiled as plain C for
 * the CPU code and as __host__ __device__ code by nvcc.
 *
 * Permutation ("address-split Feistel").  A level with 2^N buckets splits a
 * w-bit key k into high = k >> N and low = k mod 2^N and maps it to
 *
 *     address   = low XOR (mix(high, seed_j) mod 2^N)
 *     remainder = high
 *
 * This is a one-round Feistel network whose split sits exactly at the
 * address width, so it is a bijection on [0, 2^w) with the obvious inverse
 * low = address XOR mix(remainder), and each hash choice j gets its own
 * seed, hence its own permutation.
 *
 * A level with B buckets, B not a power of two, splits by division instead:
 * high = k / B, low = k mod B, and
 *
 *     address   = (low + h) mod B,   h = (mix(high, seed_j) * B) >> 64
 *     remainder = high
 *
 * For each high this rotates [0, B), so (address, remainder) still names
 * the key exactly (low = (address - h) mod B, k = high * B + low): the map
 * is injective on [0, 2^w), the last, partial block of B keys included.
 * The remainder is below 2^w / B, so it takes w - floor(log2 B) bits, as
 * with the power of two below B.  The division is a multiplication by a
 * precomputed reciprocal (layout_level.recip) and one correction step, the
 * same on both devices.  Two properties follow, for both splits:
 *
 *  - robust spread: every key bit moves the address — bits of low
 *    directly, bits of high through a strong 64-bit mixer — so keys that are
 *    constant in some bits (strides, timestamps in the high bits, a fixed
 *    worker id in the middle) still reach every bucket.  (The paper's
 *    Feistel splits at w/2 and leaves address bits above w/2 raw.)
 *  - locality: keys that differ only in low keep their relative order
 *    inside a block (XOR with, or rotation by, a constant), so a run of
 *    sequential ids fills consecutive buckets evenly — the coherent access
 *    pattern that makes sequential ingests faster and lets them fill the
 *    table higher.
 *
 * Signed keys.  A table whose keys include negative ones may fold them
 * first (zigzag: 0, -1, 1, -2, ... become 0, 1, 2, 3, ...), a bijection on
 * 64-bit patterns that keeps keys of small magnitude narrow whatever their
 * sign.  The fold sits before the permutation (layout_perm.fold), so every
 * place a key is split or rebuilt applies it, and a key's width is that of
 * its folded pattern.
 *
 * Slot encoding.  0 is EMPTY, 1 is TOMBSTONE, and a live slot is
 *     slot = ((remainder << choice_bits) | choice) + 2
 * TOMBSTONE is non-empty, so find-or-put never reuses it and the "non-empty
 * slots form a prefix" invariant of the paper survives deletes, and it is
 * below 2, so it equals no live slot.  Offsetting the code by the two state
 * values, instead of spending a bit of every slot on "live", lets a slot of
 * w bits hold any remainder up to 2^w - 3 (with no choice bits): one bit
 * more than a live bit allows, and with a division split (whose largest
 * remainder is (2^key_bits - 1) / buckets, no power of two) the fraction
 * of a bit beyond that too.  slot_fits compares that exact largest
 * remainder with the largest a slot holds.  Version 1 snapshot files hold the earlier encoding, with a live
 * bit; slot_from_v1 converts their slots.
 */
#ifndef CPHT_LAYOUT_H
#define CPHT_LAYOUT_H

#include <stdint.h>

#include "util/key_span.h"		/* CPHT_KEY_FOLD */

#ifdef __CUDACC__
#define CPHT_HD __host__ __device__ __forceinline__
#else
#define CPHT_HD static inline
#endif

#define CPHT_SLOT_EMPTY		((uint64_t) 0)
#define CPHT_SLOT_TOMBSTONE ((uint64_t) 1)
#define CPHT_SLOT_LIVE_FROM ((uint64_t) 2)	/* the smallest live slot */

/* Shifts that are defined for a count of 64 (C leaves x >> 64 undefined). */
CPHT_HD uint64_t
layout_shr(uint64_t x, int s)
{
	return s >= 64 ? 0 : x >> s;
}

CPHT_HD uint64_t
layout_shl(uint64_t x, int s)
{
	return s >= 64 ? 0 : x << s;
}

CPHT_HD uint64_t
layout_mask(int bits)
{
	return bits >= 64 ? ~(uint64_t) 0 : (((uint64_t) 1 << bits) - 1);
}

/* The finaliser of MurmurHash3: every input bit flips each output bit with
 * probability close to 1/2. */
CPHT_HD uint64_t
layout_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* High 64 bits of a 64 x 64-bit product. */
CPHT_HD uint64_t
layout_mulhi(uint64_t a, uint64_t b)
{
#ifdef __CUDA_ARCH__
	return __umul64hi(a, b);
#else
	return (uint64_t) (((unsigned __int128) a * b) >> 64);
#endif
}

/*
 * The shard of a key in a table split over nshards tables: its mix, seeded
 * apart from the tables' own permutations, scaled onto [0, nshards).  One
 * place for the host's split (kernels/shards/) and the devices' routing
 * (kernels/gpu/gpu_route.cu), which must agree key for key.
 */
CPHT_HD int
layout_shard_of(uint64_t key, uint64_t seed, int nshards)
{
	return (int) layout_mulhi(layout_mix64(key ^ seed), (uint64_t) nshards);
}

/* The zigzag fold of a signed key and its inverse (see the header comment). */
CPHT_HD uint64_t
layout_fold(uint64_t key)
{
	return CPHT_KEY_FOLD(key);
}

CPHT_HD uint64_t
layout_unfold(uint64_t folded)
{
	return (folded >> 1) ^ (uint64_t) (-(int64_t) (folded & 1));
}

/* Bits of x: 0 for 0, else floor(log2 x) + 1. */
CPHT_HD int
layout_width(uint64_t x)
{
	int			b = 0;

	while (b < 64 && (x >> b) != 0)
		b++;
	return b;
}

/*
 * One permutation: a level's buckets, keys of key_bits bits, and the seed
 * of one hash choice.  Everything an operation needs to place a key is
 * derived from these.  recip == 0: 2^addr_bits buckets (the XOR split);
 * otherwise `buckets` buckets and recip = floor((2^64 - 1) / buckets) (the
 * division split).  fold: keys are zigzag-folded before the split.
 */
typedef struct layout_perm
{
	uint64_t	seed;
	int			key_bits;
	int			addr_bits;
	uint64_t	buckets;
	uint64_t	recip;
	int			fold;
} layout_perm;

/* high = key / buckets, low = key mod buckets (division split).  The
 * estimate through the reciprocal is the quotient or one less. */
CPHT_HD uint64_t
layout_divide(layout_perm p, uint64_t key, uint64_t *low)
{
	uint64_t	q = layout_mulhi(key, p.recip);
	uint64_t	r = key - q * p.buckets;

	if (r >= p.buckets)
	{
		q++;
		r -= p.buckets;
	}
	*low = r;
	return q;
}

/* The rotation of a block (division split), in [0, buckets). */
CPHT_HD uint64_t
layout_rotation(layout_perm p, uint64_t high)
{
	return layout_mulhi(layout_mix64(high ^ p.seed), p.buckets);
}

/* Seed of hash choice `choice` of level `level` for a table seed. */
CPHT_HD uint64_t
layout_choice_seed(uint64_t table_seed, int level, int choice)
{
	return layout_mix64(table_seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t) (1 + level * 8 + choice)));
}

CPHT_HD uint64_t
layout_address(layout_perm p, uint64_t key)
{
	uint64_t	high,
				low,
				a;

	if (p.fold)
		key = layout_fold(key);
	if (p.recip == 0)
	{
		high = layout_shr(key, p.addr_bits);
		return (key ^ layout_mix64(high ^ p.seed)) & layout_mask(p.addr_bits);
	}
	high = layout_divide(p, key, &low);
	a = low + layout_rotation(p, high);
	return a >= p.buckets ? a - p.buckets : a;
}

CPHT_HD uint64_t
layout_remainder(layout_perm p, uint64_t key)
{
	uint64_t	low;

	if (p.fold)
		key = layout_fold(key);
	if (p.recip == 0)
		return layout_shr(key, p.addr_bits);
	return layout_divide(p, key, &low);
}

/* The inverse permutation: the key stored as `remainder` in bucket `address`. */
CPHT_HD uint64_t
layout_key(layout_perm p, uint64_t address, uint64_t remainder)
{
	uint64_t	low,
				h,
				key;

	if (p.recip == 0)
	{
		low = (address ^ layout_mix64(remainder ^ p.seed)) & layout_mask(p.addr_bits);
		key = layout_shl(remainder, p.addr_bits) | low;
	}
	else
	{
		h = layout_rotation(p, remainder);
		low = address >= h ? address - h : address + p.buckets - h;
		key = remainder * p.buckets + low;
	}
	return p.fold ? layout_unfold(key) : key;
}

/* Slot encoding (see the header comment). */
CPHT_HD uint64_t
slot_encode(uint64_t remainder, int choice, int choice_bits)
{
	return ((remainder << choice_bits) | (uint64_t) choice) + CPHT_SLOT_LIVE_FROM;
}

CPHT_HD int
slot_is_live(uint64_t slot)
{
	return slot >= CPHT_SLOT_LIVE_FROM;
}

CPHT_HD uint64_t
slot_remainder(uint64_t slot, int choice_bits)
{
	return (slot - CPHT_SLOT_LIVE_FROM) >> choice_bits;
}

CPHT_HD int
slot_choice(uint64_t slot, int choice_bits)
{
	return (int) ((slot - CPHT_SLOT_LIVE_FROM) & layout_mask(choice_bits));
}

/* A slot of version 1 of the encoding (EMPTY 0, TOMBSTONE 2, a live slot
 * (remainder << (1 + choice_bits)) | (choice << 1) | 1) in this one. */
CPHT_HD uint64_t
slot_from_v1(uint64_t v1)
{
	if ((v1 & 1) == 0)
		return v1 == 0 ? CPHT_SLOT_EMPTY : CPHT_SLOT_TOMBSTONE;
	return (v1 >> 1) + CPHT_SLOT_LIVE_FROM;
}

/*
 * The largest remainder of a key below 2^key_bits in a level of `buckets`
 * buckets: key >> floor(log2 buckets) for a power of two (the XOR split),
 * key / buckets otherwise (the division split), at the largest key.
 */
CPHT_HD uint64_t
slot_max_remainder(int key_bits, uint64_t buckets)
{
	uint64_t	top = layout_mask(key_bits);

	if ((buckets & (buckets - 1)) == 0)
		return top >> (layout_width(buckets) - 1);
	return top / buckets;
}

/*
 * The largest remainder a slot of slot_bits bits (16, 32 or 64) holds in
 * a level of `choices` hash choices (choice_bits bits of choice): the one
 * whose code with the last choice, (remainder << choice_bits | choices -
 * 1) + 2, is 2^slot_bits - 1 or below.
 */
CPHT_HD uint64_t
slot_held_remainder(int slot_bits, int choices, int choice_bits)
{
	return (layout_mask(slot_bits) - CPHT_SLOT_LIVE_FROM - (uint64_t) (choices - 1)) >> choice_bits;
}

/*
 * Whether slots of slot_bits bits hold every key below 2^key_bits in a
 * level of `buckets` buckets: whether the largest remainder is one they
 * hold.
 */
CPHT_HD int
slot_fits(int slot_bits, int key_bits, uint64_t buckets, int choices, int choice_bits)
{
	return slot_max_remainder(key_bits, buckets) <= slot_held_remainder(slot_bits, choices, choice_bits);
}

/*
 * The fewest buckets at which slots of slot_bits bits hold every key below
 * 2^key_bits (slot_fits): floor((2^key_bits - 1) / buckets) <= held, the
 * largest remainder they hold, from buckets = floor((2^key_bits - 1) /
 * (held + 1)) + 1 on.  (held + 1 cannot wrap: held < 2^64 - 2.)
 */
CPHT_HD uint64_t
slot_fewest_buckets(int slot_bits, int key_bits, int choices, int choice_bits)
{
	return layout_mask(key_bits) / (slot_held_remainder(slot_bits, choices, choice_bits) + 1) + 1;
}

/* Smallest of 16/32/64 bits that holds every key below 2^key_bits (see
 * slot_fits); 0 if none does. */
CPHT_HD int
slot_width_for(int key_bits, uint64_t buckets, int choices, int choice_bits)
{
	for (int w = 16; w <= 64; w *= 2)
		if (slot_fits(w, key_bits, buckets, choices, choice_bits))
			return w;
	return 0;
}

/*
 * The widest keys (bits, at most 64) slots of slot_bits bits hold: keys
 * below 2^k fit while floor((2^k - 1) / buckets) <= held, the largest
 * remainder they hold, that is while 2^k <= (held + 1) * buckets, so
 * k = floor(log2((held + 1) * buckets)).
 */
CPHT_HD int
slot_key_bits_held(int slot_bits, uint64_t buckets, int choices, int choice_bits)
{
	uint64_t	held = slot_held_remainder(slot_bits, choices, choice_bits);

	if (layout_mulhi(held + 1, buckets) != 0)
		return 64;
	return layout_width((held + 1) * buckets) - 1;
}

/*
 * Geometry of one level as the operations see it: where its slots are, how
 * wide they are, and its permutations.  Filled by the table layer and
 * copied by value into kernels.
 */
typedef struct layout_level
{
	void	   *slots;			/* host or device memory, slot_bits wide */
	uint64_t	buckets;		/* any number from 8 on */
	uint64_t	recip;			/* 0 for 2^addr_bits buckets, else
								 * floor((2^64 - 1) / buckets) */
	int			addr_bits;		/* bits of an address: ceil(log2 buckets) */
	int			bucket_slots;
	int			slot_bits;		/* 16, 32 or 64 */
	int			choice_bits;	/* bits of the hash-choice index in a slot */
	int			choices;		/* hash choices into this level */
	int			fold;			/* keys are zigzag-folded (signed keys) */
	uint64_t	seeds[4];		/* one per choice */
} layout_level;

CPHT_HD layout_perm
layout_level_perm(const layout_level *lv, int key_bits, int choice)
{
	layout_perm p;

	p.seed = lv->seeds[choice];
	p.key_bits = key_bits;
	p.addr_bits = lv->addr_bits;
	p.fold = lv->fold;
	p.buckets = lv->buckets;
	p.recip = lv->recip;
	return p;
}

/* Bytes of one slot of the level, and of all its slots. */
CPHT_HD uint64_t
layout_slot_bytes(const layout_level *lv)
{
	return (uint64_t) (lv->slot_bits / 8);
}

CPHT_HD uint64_t
layout_level_bytes(const layout_level *lv)
{
	return lv->buckets * (uint64_t) lv->bucket_slots * layout_slot_bytes(lv);
}

/* Index of the first slot of a bucket. */
CPHT_HD uint64_t
layout_bucket_start(const layout_level *lv, uint64_t address)
{
	return address * (uint64_t) lv->bucket_slots;
}

/*
 * A key's buckets in the order find visits them, numbered from 0: the
 * iceberg's primary bucket, then its secondary choices; the cuckoo's
 * choices.  Bucket `order` is choice *choice of level *level.
 */
CPHT_HD void
layout_where_bucket(int levels, int order, int *level, int *choice)
{
	*level = levels > 1 && order > 0 ? 1 : 0;
	*choice = levels > 1 && order > 0 ? order - 1 : order;
}

/* Which of the cuckoo's choices follows `choice` after an eviction. */
CPHT_HD int
layout_next_choice(int choice, int choices)
{
	return choice + 1 == choices ? 0 : choice + 1;
}

#endif							/* CPHT_LAYOUT_H */
