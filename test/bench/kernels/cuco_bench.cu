/*
 * cuco_bench.cu — NVIDIA cuCollections' static_set<uint64_t> timed on the
 * inputs of gpu_bench.cu (bench_keys.cuh: the same keys, drawn from
 * [0, 2^37), the same fills and query mixes), so that its figures and
 * cpht's of one run compare row by row.
 *
 *   put    insert into an empty set up to `fill` (insert_async)
 *   find   2^26 queries on a set filled to `fill`, `pos` of them hits
 *          (contains_async)
 *   fop    insert_and_find of as many keys as the set has slots, with
 *          duplicates, from empty to `fill` (gpu_bench's fop at pos 0)
 *   fop50  insert_and_find of fill * slots distinct keys, half of them
 *          present (the set prefilled to fill / 2)
 *
 * The set has 2^27 slots requested (cuCollections may round the capacity
 * up; fills are of the capacity it reports) of 8 bytes each: 1 GiB, against
 * cpht's 0.3-0.5 GiB for as many slots.  Each figure is the median of
 * --reps timed repetitions after one untimed, CUDA events around the
 * operation alone; every repetition is checked (sizes, hits, inserted
 * counts).  Probing schemes: cuCollections' default (double hashing,
 * 4-thread groups), double hashing with 1 thread and linear probing with
 * 4 threads.
 *
 * Build (test/bench/kernels/build-gpu-bench.sh, when CUCO_INCLUDE names
 * cuCollections' include folder): nvcc -std=c++17 --expt-extended-lambda
 * --expt-relaxed-constexpr -I$CUCO_INCLUDE -Ikernels.
 * Output: CSV in gpu_bench's columns (table "cuco-dh4" etc.) on stdout or
 * --csv FILE.  Options: --reps N, --fills F,F,...
 */
#include <cuda/std/functional>
#include <thrust/version.h>

/*
 * The stored cuCollections (2024-10) still names thrust::identity, which
 * CCCL 3 (CUDA 13) removed in favour of cuda::std::identity; give it the
 * old name back before its headers are read.
 */
#if THRUST_VERSION >= 300000
namespace thrust
{
template <class T = void>
struct identity
{
	template <class U>
	__host__ __device__ constexpr U &&operator()(U &&x) const noexcept
	{
		return static_cast<U &&>(x);
	}
};
}
#endif

#include <cuco/static_set.cuh>
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "bench_keys.cuh"

#define SLOTS ((uint64_t) 1 << 27)
#define QUERIES ((uint64_t) 1 << 26)

static cudaEvent_t ev0,
			ev1;
static int	failures = 0;
static int	reps = 5;
static FILE *csv;
static char device[128];
static char date[32];

static std::vector<double> fills = {0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95};
static const double find_pos[] = {0, 0.5, 1};

/* device buffers */
static uint64_t *keys,
		   *keys2,
		   *queries,
		   *found;
static uint32_t *rank1,
		   *rank2;
static bool *flags;
static unsigned long long *dhits;
static void *sort_tmp;
static size_t sort_bytes;

static void
start(void)
{
	CK(cudaDeviceSynchronize());
	CK(cudaEventRecord(ev0, 0));
}

static double
stop(void)
{
	float		ms = 0;

	CK(cudaEventRecord(ev1, 0));
	CK(cudaEventSynchronize(ev1));
	CK(cudaEventElapsedTime(&ms, ev0, ev1));
	CK(cudaGetLastError());
	return ms;
}

static uint64_t
count_true(const bool *d, uint64_t n)
{
	return (uint64_t) thrust::count(thrust::device, d, d + n, true);
}

/* gpu_bench's shuffle: keys sorted by a random rank. */
static void
shuffle(uint64_t *k, uint32_t *rank, uint64_t n)
{
	size_t		need = 0;

	CK(cub::DeviceRadixSort::SortPairs(NULL, need, rank, rank2, k, keys2, (int) n));
	if (need > sort_bytes)
	{
		if (sort_tmp)
			CK(cudaFree(sort_tmp));
		CK(cudaMalloc(&sort_tmp, need));
		sort_bytes = need;
	}
	CK(cub::DeviceRadixSort::SortPairs(sort_tmp, need, rank, rank2, k, keys2, (int) n));
	CK(cudaMemcpy(k, keys2, n * sizeof(uint64_t), cudaMemcpyDeviceToDevice));
}

static void
emit(const char *table, const char *op, const char *pos, double fill, double ms, uint64_t n, int ok)
{
	double		gps = ok ? n / (ms * 1e6) : 0;

	fprintf(csv, "%s,%s,%s,%s,%s,64,-,0,%.2f,direct,%.3f,%.3f,%llu,-,%d\n",
			date, device, table, op, pos, fill, gps, ok ? ms : 0.0, (unsigned long long) n, ok);
	fflush(csv);
	fprintf(stderr, "  %-9s %-5s pos %-4s fill %.2f %8.2f G/s  (%.3f ms)%s\n",
			table, op, pos, fill, gps, ms, ok ? "" : "  FAILED");
}

template <class Set>
static void
bench_set(const char *name, Set &set)
{
	const uint64_t total = set.capacity();
	const uint64_t salt = 0x1234567;

	fprintf(stderr, "%s: capacity %llu slots (%llu bytes)\n", name, (unsigned long long) total,
			(unsigned long long) total * 8);
	for (double fill : fills)
	{
		const uint64_t u = (uint64_t) (fill * (double) total);
		std::vector<double> tput,
					tfind[3],
					tfop,
					tfop50;
		int			ok = 1;

		/* put, then finds on the filled set */
		gen_unique<<<grid_for(u), 256>>>(keys, u, 0, salt);
		CK(cudaGetLastError());
		for (int rep = 0; rep <= reps; rep++)
		{
			set.clear();
			start();
			set.insert_async(keys, keys + u);
			double		ms = stop();

			if (rep > 0)
				tput.push_back(ms);
			if (set.size() != u)
			{
				fprintf(stderr, "CHECK FAILED: %s put: size %llu, %llu expected\n", name,
						(unsigned long long) set.size(), (unsigned long long) u);
				failures++;
				ok = 0;
			}
			for (int p = 0; p < 3; p++)
			{
				unsigned long long hits = 0;
				uint64_t	got;

				CK(cudaMemset(dhits, 0, sizeof(unsigned long long)));
				gen_queries<<<grid_for(QUERIES), 256>>>(queries, QUERIES, u, find_pos[p], salt,
														 77 + rep * 7 + p, dhits);
				CK(cudaGetLastError());
				start();
				set.contains_async(queries, queries + QUERIES, flags);
				ms = stop();
				if (rep > 0)
					tfind[p].push_back(ms);
				CK(cudaMemcpy(&hits, dhits, sizeof(hits), cudaMemcpyDeviceToHost));
				got = count_true(flags, QUERIES);
				if (got != hits)
				{
					fprintf(stderr, "CHECK FAILED: %s find: %llu found, %llu expected\n", name,
							(unsigned long long) got, hits);
					failures++;
				}
			}
		}
		emit(name, "put", "-", fill, median(tput), u, ok);
		for (int p = 0; p < 3; p++)
		{
			char		pos[16];

			snprintf(pos, sizeof(pos), "%g", find_pos[p]);
			emit(name, "find", pos, fill, median(tfind[p]), QUERIES, ok);
		}

		/* fop from empty: `total` keys with duplicates, u distinct */
		gen_fop<<<grid_for(total), 256>>>(keys, rank1, total, u, salt, 4242);
		CK(cudaGetLastError());
		shuffle(keys, rank1, total);
		ok = 1;
		for (int rep = 0; rep <= reps; rep++)
		{
			set.clear();
			start();
			set.insert_and_find_async(keys, keys + total, found, flags);
			double		ms = stop();
			uint64_t	ins = count_true(flags, total);

			if (rep > 0)
				tfop.push_back(ms);
			if (ins != u || set.size() != u)
			{
				fprintf(stderr, "CHECK FAILED: %s fop: %llu inserted, %llu expected\n", name,
						(unsigned long long) ins, (unsigned long long) u);
				failures++;
				ok = 0;
			}
		}
		emit(name, "fop", "0", fill, median(tfop), total, ok);

		/* fop50: prefill [0, u/2), then [0, u) shuffled */
		{
			const uint64_t half = u / 2;

			gen_range<<<grid_for(u), 256>>>(keys, rank1, u, 0, salt, 99);
			CK(cudaGetLastError());
			shuffle(keys, rank1, u);
			gen_unique<<<grid_for(half), 256>>>(queries, half, 0, salt);
			CK(cudaGetLastError());
			ok = 1;
			for (int rep = 0; rep <= reps; rep++)
			{
				set.clear();
				set.insert_async(queries, queries + half);
				start();
				set.insert_and_find_async(keys, keys + u, found, flags);
				double		ms = stop();
				uint64_t	ins = count_true(flags, u);

				if (rep > 0)
					tfop50.push_back(ms);
				if (ins != u - half)
				{
					fprintf(stderr, "CHECK FAILED: %s fop50: %llu inserted, %llu expected\n", name,
							(unsigned long long) ins, (unsigned long long) (u - half));
					failures++;
					ok = 0;
				}
			}
			emit(name, "fop50", "-", fill, median(tfop50), u, ok);
		}
	}
}

int
main(int argc, char **argv)
{
	cudaDeviceProp prop;
	time_t		now = time(NULL);
	const char *out = NULL;
	constexpr uint64_t empty = ~(uint64_t) 0;	/* never a key: keys are < 2^37 */

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc)
			out = argv[++i];
		else if (strcmp(argv[i], "--fills") == 0 && i + 1 < argc)
			parse_fills(argv[++i], fills);
		else
		{
			fprintf(stderr, "usage: %s [--reps N] [--fills F,F,...] [--csv FILE]\n", argv[0]);
			return 2;
		}
	}
	CK(cudaGetDeviceProperties(&prop, 0));
	snprintf(device, sizeof(device), "%s", prop.name);
	strftime(date, sizeof(date), "%Y-%m-%d", gmtime(&now));
	csv = out ? fopen(out, "w") : stdout;
	if (csv == NULL)
	{
		perror(out);
		return 1;
	}
	CK(cudaEventCreate(&ev0));
	CK(cudaEventCreate(&ev1));
	CK(cudaMalloc(&keys, SLOTS * 2 * sizeof(uint64_t)));
	CK(cudaMalloc(&keys2, SLOTS * 2 * sizeof(uint64_t)));
	CK(cudaMalloc(&queries, SLOTS * 2 * sizeof(uint64_t)));
	CK(cudaMalloc(&found, SLOTS * 2 * sizeof(uint64_t)));
	CK(cudaMalloc(&rank1, SLOTS * 2 * sizeof(uint32_t)));
	CK(cudaMalloc(&rank2, SLOTS * 2 * sizeof(uint32_t)));
	CK(cudaMalloc(&flags, SLOTS * 2));
	CK(cudaMalloc(&dhits, sizeof(unsigned long long)));
	fprintf(stderr, "%s, %s, cuCollections static_set<uint64_t>\n", prop.name, date);
	fprintf(csv, "date,device,table,op,pos,slot_bits,bucket,secondary_bits,fill,mode,gkeys_s,ms,n,share_of_ceiling,ok\n");
	{
		cuco::static_set<uint64_t> set{SLOTS, cuco::empty_key<uint64_t>{empty}};

		bench_set("cuco-dh4", set);
	}
	{
		using probe = cuco::double_hashing<1, cuco::default_hash_function<uint64_t>>;
		cuco::static_set<uint64_t, cuco::extent<std::size_t>, cuda::thread_scope_device,
						 thrust::equal_to<uint64_t>, probe> set{SLOTS, cuco::empty_key<uint64_t>{empty}};

		bench_set("cuco-dh1", set);
	}
	{
		using probe = cuco::linear_probing<4, cuco::default_hash_function<uint64_t>>;
		cuco::static_set<uint64_t, cuco::extent<std::size_t>, cuda::thread_scope_device,
						 thrust::equal_to<uint64_t>, probe> set{SLOTS, cuco::empty_key<uint64_t>{empty}};

		bench_set("cuco-lp4", set);
	}
	if (csv != stdout)
		fclose(csv);
	if (failures)
		fprintf(stderr, "%d result checks FAILED\n", failures);
	return failures ? 1 : 0;
}
