/*
 * unique_keys.c — N distinct keys below 2^W, in a random-looking order, as
 * a file of little-endian uint64 (the input of the compact-hashing paper's
 * `rates` benchmark; paper-side-by-side.sh).
 *
 *     unique_keys N W FILE
 *
 * Key i is a bijection of [0, 2^W) applied to i: odd multiplications and
 * xor-shifts, each invertible modulo 2^W, so no two keys are equal and no
 * sort or hash set is needed to make them so.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t
mix(uint64_t x, int w, uint64_t mask)
{
	x = (x * 0x9E3779B97F4A7C15ull) & mask;
	x ^= x >> (w / 2);
	x = (x * 0xBF58476D1CE4E5B9ull) & mask;
	x ^= x >> (w / 3);
	return (x * 0x94D049BB133111EBull) & mask;
}

int
main(int argc, char **argv)
{
	static uint64_t buf[1 << 16];
	uint64_t	n, mask;
	int			w;
	size_t		m = 0;
	FILE	   *f;

	if (argc != 4 || (w = atoi(argv[2])) < 8 || w > 64)
	{
		fprintf(stderr, "usage: unique_keys N W FILE (8 <= W <= 64)\n");
		return 2;
	}
	n = strtoull(argv[1], NULL, 10);
	mask = w == 64 ? ~0ull : (1ull << w) - 1;
	if (w < 64 && n > (1ull << w))
	{
		fprintf(stderr, "unique_keys: only 2^%d keys below 2^%d\n", w, w);
		return 2;
	}
	if ((f = fopen(argv[3], "wb")) == NULL)
	{
		perror(argv[3]);
		return 1;
	}
	for (uint64_t i = 0; i < n; i++)
	{
		buf[m++] = mix(i, w, mask);
		if (m == sizeof(buf) / sizeof(buf[0]))
		{
			if (fwrite(buf, sizeof(buf[0]), m, f) != m)
				return 1;
			m = 0;
		}
	}
	if (fwrite(buf, sizeof(buf[0]), m, f) != m || fclose(f) != 0)
		return 1;
	return 0;
}
