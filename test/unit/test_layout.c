/*
 * test_layout.c — the permutations are bijections with exact inverses for
 * every key width, differ per hash choice, and the slot encoding round-trips;
 * the division split of bucket counts that are no power of two names every
 * key exactly, spreads keys evenly and keeps runs of ids together.
 */
#include <string.h>

#include "table/layout.h"
#include "unit.h"

static void
check_exhaustive(int key_bits, int addr_bits, uint64_t seed)
{
	uint64_t	n = (uint64_t) 1 << key_bits;
	uint8_t    *seen = calloc(n, 1);
	layout_perm p = {seed, key_bits, addr_bits, 0, 0, 0};
	int			ok_inverse = 1,
				ok_range = 1,
				ok_bijective = 1;

	for (uint64_t k = 0; k < n; k++)
	{
		uint64_t	a = layout_address(p, k);
		uint64_t	r = layout_remainder(p, k);
		uint64_t	image = (r << addr_bits) | a;

		ok_range &= a < ((uint64_t) 1 << addr_bits) && r < ((uint64_t) 1 << (key_bits - addr_bits));
		ok_inverse &= layout_key(p, a, r) == k;
		if (image < n)
		{
			ok_bijective &= !seen[image];
			seen[image] = 1;
		}
		else
			ok_bijective = 0;
	}
	CHECK(ok_range, "w=%d N=%d: address/remainder out of range", key_bits, addr_bits);
	CHECK(ok_inverse, "w=%d N=%d: inverse not exact", key_bits, addr_bits);
	CHECK(ok_bijective, "w=%d N=%d: not a bijection", key_bits, addr_bits);
	free(seen);
}

/* A division-split permutation for `buckets` buckets. */
static layout_perm
division_perm(uint64_t seed, int key_bits, uint64_t buckets)
{
	layout_perm p = {seed, key_bits, 0, buckets, UINT64_MAX / buckets, 0};
	int			floor_bits = 0;

	while (buckets >> (floor_bits + 1))
		floor_bits++;
	p.addr_bits = floor_bits + 1;
	return p;
}

/*
 * Every w-bit key gets an address below B and a remainder below 2^(w -
 * floor(log2 B)), no two keys the same pair, and the inverse gives the key
 * back; the buckets get ceil or floor of 2^w / B keys each (each block of
 * B keys is a rotation); consecutive keys of a block land in consecutive
 * buckets.
 */
static void
check_division(int key_bits, uint64_t buckets, uint64_t seed)
{
	uint64_t	n = (uint64_t) 1 << key_bits;
	layout_perm p = division_perm(seed, key_bits, buckets);
	int			floor_bits = p.addr_bits - 1;
	uint64_t	rem_limit = (uint64_t) 1 << (key_bits - floor_bits);
	uint8_t    *seen = calloc(buckets * rem_limit, 1);
	uint32_t   *load = calloc(buckets, sizeof(uint32_t));
	int			ok_inverse = 1,
				ok_range = 1,
				ok_injective = 1,
				ok_even = 1,
				ok_local = 1;

	for (uint64_t k = 0; k < n; k++)
	{
		uint64_t	a = layout_address(p, k);
		uint64_t	r = layout_remainder(p, k);

		if (a >= buckets || r >= rem_limit)
		{
			ok_range = 0;
			continue;
		}
		ok_inverse &= layout_key(p, a, r) == k;
		ok_injective &= !seen[r * buckets + a];
		seen[r * buckets + a] = 1;
		load[a]++;
		if (k % buckets != 0)
			ok_local &= a == (layout_address(p, k - 1) + 1) % buckets;
	}
	for (uint64_t b = 0; b < buckets; b++)
		ok_even &= load[b] == n / buckets || load[b] == n / buckets + 1;
	CHECK(ok_range, "w=%d B=%llu: address/remainder out of range", key_bits, (unsigned long long) buckets);
	CHECK(ok_inverse, "w=%d B=%llu: inverse not exact", key_bits, (unsigned long long) buckets);
	CHECK(ok_injective, "w=%d B=%llu: two keys share a place", key_bits, (unsigned long long) buckets);
	CHECK(ok_even, "w=%d B=%llu: uneven bucket loads", key_bits, (unsigned long long) buckets);
	CHECK(ok_local, "w=%d B=%llu: consecutive keys not in consecutive buckets", key_bits, (unsigned long long) buckets);
	free(seen);
	free(load);
}

int
main(void)
{
	uint64_t	rng = 42;

	/* Division split: exhaustive for small widths and bucket counts of
	 * every kind; random keys for every width up to 64. */
	for (int w = 8; w <= 18; w += 2)
		for (uint64_t b = 9; b < ((uint64_t) 1 << (w - 1)); b = b * 3 + 1)
			if ((b & (b - 1)) != 0)
				check_division(w, b, unit_rand(&rng));
	for (int w = 8; w <= 64; w++)
	{
		int			ok = 1;

		for (uint64_t b = 12; b < ((uint64_t) 1 << (w < 48 ? w : 48)); b = b * 5 + 3)
		{
			layout_perm p = division_perm(unit_rand(&rng), w, b);

			for (int i = 0; i < 5000; i++)
			{
				uint64_t	k = unit_rand(&rng) & layout_mask(w);
				uint64_t	a = layout_address(p, k);

				ok &= a < b && layout_key(p, a, layout_remainder(p, k)) == k;
			}
		}
		CHECK(ok, "w=%d: division split: inverse not exact on random keys", w);
	}

	/* Exhaustive for small widths, every address width. */
	for (int w = 8; w <= 20; w++)
		for (int nbits = 3; nbits <= w; nbits += (w > 12 ? 4 : 1))
			check_exhaustive(w, nbits, unit_rand(&rng));

	/* Random keys for every width up to 64. */
	for (int w = 8; w <= 64; w++)
	{
		int			ok = 1;

		for (int nbits = 3; nbits <= (w < 48 ? w : 48); nbits += 5)
		{
			layout_perm p = {unit_rand(&rng), w, nbits, 0, 0, 0};

			for (int i = 0; i < 20000; i++)
			{
				uint64_t	k = unit_rand(&rng) & layout_mask(w);

				ok &= layout_key(p, layout_address(p, k), layout_remainder(p, k)) == k;
			}
		}
		CHECK(ok, "w=%d: inverse not exact on random keys", w);
	}

	/* Different seeds (hash choices) give different permutations. */
	{
		layout_perm p0 = {layout_choice_seed(7, 1, 0), 64, 20, 0, 0, 0};
		layout_perm p1 = {layout_choice_seed(7, 1, 1), 64, 20, 0, 0, 0};
		int			same = 0;

		for (uint64_t k = 0; k < 100000; k++)
		{
			uint64_t	key = k * 0x10001ULL + (k << 33);

			same += layout_address(p0, key) == layout_address(p1, key);
		}
		/* Independent choices agree on about 1 in 2^20 keys. */
		CHECK(same < 10, "choices agree on %d of 100000 keys", same);
	}

	/* Every key bit moves the address: flip each bit of random keys. */
	{
		layout_perm p = {12345, 64, 22, 0, 0, 0};

		for (int bit = 0; bit < 64; bit++)
		{
			int			moved = 0;

			for (int i = 0; i < 1000; i++)
			{
				uint64_t	k = unit_rand(&rng);

				moved += layout_address(p, k) != layout_address(p, k ^ ((uint64_t) 1 << bit));
			}
			CHECK(moved == 1000, "bit %d moved the address of only %d of 1000 keys", bit, moved);
		}
	}

	/* Locality: an aligned run of 2^j keys below the address width maps onto
	 * an aligned run of 2^j buckets. */
	{
		layout_perm p = {999, 64, 20, 0, 0, 0};
		uint64_t	base = 0x123456789ULL << 20;
		int			ok = 1;

		for (uint64_t k = 0; k < 4096; k++)
			ok &= (layout_address(p, base + k) >> 12) == (layout_address(p, base) >> 12);
		CHECK(ok, "4096 sequential keys left their 4096-bucket block");
	}

	/* Slot encoding round-trips, live slots are 2 and above, EMPTY and TOMBSTONE are not live. */
	for (int cb = 0; cb <= 2; cb++)
		for (int i = 0; i < 1000; i++)
		{
			uint64_t	r = unit_rand(&rng) >> (3 + cb);
			int			c = (int) (unit_rand(&rng) % (uint64_t) (1 << cb));
			uint64_t	s = slot_encode(r, c, cb);

			CHECK(slot_is_live(s) && slot_remainder(s, cb) == r && slot_choice(s, cb) == c &&
				  s != CPHT_SLOT_TOMBSTONE && s != CPHT_SLOT_EMPTY, "slot round trip");
		}
	CHECK(!slot_is_live(CPHT_SLOT_EMPTY) && !slot_is_live(CPHT_SLOT_TOMBSTONE), "state values");
	CHECK(slot_encode(0, 0, 0) == 2 && slot_encode(65533, 0, 0) == 65535, "a 16-bit slot holds remainders 0..65533");

	/* Version 1 slots (live bit) convert to the same remainder and choice. */
	for (int cb = 0; cb <= 2; cb++)
		for (int i = 0; i < 1000; i++)
		{
			uint64_t	r = unit_rand(&rng) >> (3 + cb);
			int			c = (int) (unit_rand(&rng) % (uint64_t) (1 << cb));
			uint64_t	v1 = (r << (1 + cb)) | ((uint64_t) c << 1) | 1;

			CHECK(slot_from_v1(v1) == slot_encode(r, c, cb), "v1 slot %llu", (unsigned long long) v1);
		}
	CHECK(slot_from_v1(0) == CPHT_SLOT_EMPTY && slot_from_v1(2) == CPHT_SLOT_TOMBSTONE, "v1 state values");

	/*
	 * The largest remainder is the largest layout_remainder over every key
	 * (all keys of up to 20 bits, both splits), and the narrowest fitting
	 * width holds its code while the next narrower one does not.
	 */
	{
		const uint64_t bucket_counts[] = {8, 12, 64, 100, 1000, 4096, 6000};

		for (int bi = 0; bi < 7; bi++)
			for (int kb = 8; kb <= 20; kb += 4)
			{
				uint64_t	b = bucket_counts[bi];
				layout_level lv = {0};
				layout_perm p;
				uint64_t	seen = 0;

				lv.buckets = b;
				lv.addr_bits = (b & (b - 1)) == 0 ? layout_width(b) - 1 : layout_width(b);
				lv.recip = (b & (b - 1)) == 0 ? 0 : UINT64_MAX / b;
				lv.seeds[0] = 17;
				p = layout_level_perm(&lv, kb, 0);
				for (uint64_t k = 0; k < ((uint64_t) 1 << kb); k++)
					if (layout_remainder(p, k) > seen)
						seen = layout_remainder(p, k);
				CHECK(slot_max_remainder(kb, b) == seen, "%llu buckets, %d-bit keys: largest remainder %llu, not %llu",
					  (unsigned long long) b, kb, (unsigned long long) seen,
					  (unsigned long long) slot_max_remainder(kb, b));
			}
	}
	for (int cb = 0; cb <= 2; cb++)
		for (int i = 0; i < 2000; i++)
		{
			int			kb = 8 + (int) (unit_rand(&rng) % 57);
			uint64_t	b = 8 + (unit_rand(&rng) >> (unit_rand(&rng) % 60 + 4));
			int			choices = cb == 0 ? 1 : cb == 1 ? 2 : 3;
			int			w = slot_width_for(kb, b, choices, cb);
			uint64_t	top = slot_max_remainder(kb, b);

			/* the top code in 128 bits, so that no shift can wrap */
			unsigned __int128 code = (((unsigned __int128) top << cb) | (unsigned) (choices - 1)) + 2;

			CHECK(w != 0 && code <= (((unsigned __int128) 1 << w) - 1) &&
				  (w == 16 || code > (((unsigned __int128) 1 << (w / 2)) - 1)),
				  "%d-bit keys, %llu buckets, %d choices: %d-bit slots", kb, (unsigned long long) b, choices, w);
			CHECK(slot_key_bits_held(w, b, choices, cb) >= kb &&
				  (slot_key_bits_held(w, b, choices, cb) == 64 ||
				   !slot_fits(w, slot_key_bits_held(w, b, choices, cb) + 1, b, choices, cb)),
				  "%d-bit slots, %llu buckets: widest keys held", w, (unsigned long long) b);
		}
	/* the closed form of the widest keys held is the widest that slot_fits */
	for (int i = 0; i < 3000; i++)
	{
		int			cb = (int) (unit_rand(&rng) % 3);
		int			choices = cb == 0 ? 1 : cb == 1 ? 2 : 3;
		int			w = 16 << (unit_rand(&rng) % 3);
		uint64_t	b = 8 + (unit_rand(&rng) >> (unit_rand(&rng) % 60 + 4));
		int			widest = 64;

		while (widest > 0 && !slot_fits(w, widest, b, choices, cb))
			widest--;
		CHECK(slot_key_bits_held(w, b, choices, cb) == widest, "%d-bit slots, %llu buckets, %d choices: %d, not %d",
			  w, (unsigned long long) b, choices, slot_key_bits_held(w, b, choices, cb), widest);
	}
	/* 37-bit keys: 16-bit primary slots from about 2^21 buckets (a live
	 * bit would need 2^22), 32-bit secondary slots with two choices. */
	CHECK(slot_width_for(37, (uint64_t) 1 << 22, 1, 0) == 16, "37-bit keys, 2^22 buckets: 16-bit slots");
	CHECK(slot_width_for(37, ((uint64_t) 1 << 21) + 65, 1, 0) == 16, "37-bit keys, 2^21 + 65 buckets: 16-bit slots");
	CHECK(slot_width_for(37, ((uint64_t) 1 << 21) + 64, 1, 0) == 32, "37-bit keys, 2^21 + 64 buckets: 32-bit slots");
	CHECK(slot_width_for(37, (uint64_t) 1 << 22, 2, 1) == 32, "37-bit keys, 2^22 buckets, 2 choices: 32-bit");
	CHECK(slot_width_for(64, (uint64_t) 1 << 20, 1, 0) == 64, "64-bit keys: 64-bit slots");
	CHECK(slot_width_for(64, 8, 3, 2) == 64, "64-bit keys in 8 buckets of 3 choices: 64-bit slots");
	UNIT_DONE();
}
