#!/bin/bash
# Side-by-side timing of two builds of the GPU kernels on one machine, with
# the differential tests of the second and cuCollections, in one go:
#
#   test/bench/kernels/ab-gpu.sh BASE_BUILD NEW_BUILD OUT_DIR [ROUNDS]
#
# BASE_BUILD and NEW_BUILD are folders made by build-gpu-bench.sh (NEW_BUILD
# with CUCO_INCLUDE set, for cuco_bench.bin).  Runs test_gpu_vs_cpu and
# test_same_slots of NEW_BUILD, then ROUNDS (default 3) rounds that run
# gpu_bench of BASE_BUILD and NEW_BUILD one after the other (`--quick --modes
# direct`, cuckoo 32-bit 16-slot and iceberg 16-bit 16/8 direct, iceberg
# 16-bit 8/4 grouped; medians of 5 each), then cuco_bench.bin on the same
# keys, and last Nsight Compute on the cuckoo put to fill 0.9 of both builds
# when ncu is there.  CSVs and logs go to OUT_DIR; test/bench/kernels/compare-ab.py
# OUT_DIR compares the two builds row by row (same rows, same keys, same
# machine) and test/bench/kernels/compare-cuco.py OUT_DIR/cuco.csv OUT_DIR/base-*.csv
# puts cuCollections beside them.  Bring OUT_DIR back as one archive: the
# files are many.
set -u
BASE=$1
NEW=$2
O=$3
ROUNDS=${4:-3}
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$O/gpu.txt" 2>&1
date -u >> "$O/gpu.txt"
T=$O/tests.log
: > "$T"
for t in test_gpu_vs_cpu test_same_slots; do
	"$NEW/$t.bin" >> "$T" 2>&1
	echo "$t rc=$?" >> "$T"
done
grep "rc=" "$T"
for r in $(seq 1 "$ROUNDS"); do
	for v in base new; do
		d=$BASE
		[ $v = new ] && d=$NEW
		c=--no-ceilings
		[ "$r" = 1 ] && c=
		"$d/gpu_bench.bin" --quick --modes direct --reps 5 $c --csv "$O/$v-quick-$r.csv" 2> "$O/$v-quick-$r.log" ||
			echo "$v quick $r failed"
		for o in cuckoo:32:16 iceberg:16:16; do
			"$d/gpu_bench.bin" --only $o --modes direct --reps 5 --no-ceilings --csv "$O/$v-${o//:/_}-$r.csv" \
				2> "$O/$v-${o//:/_}-$r.log" || echo "$v $o $r failed"
		done
		"$d/gpu_bench.bin" --only iceberg:16:8 --modes grouped --reps 5 --no-ceilings --csv "$O/$v-grouped-$r.csv" \
			2> "$O/$v-grouped-$r.log" || echo "$v grouped $r failed"
	done
	echo "round $r done $(date +%T)"
done
if [ -x "$NEW/cuco_bench.bin" ]; then
	"$NEW/cuco_bench.bin" --reps 5 --csv "$O/cuco.csv" 2> "$O/cuco.log" || echo "cuco_bench failed"
fi
if command -v ncu > /dev/null; then
	for v in base new; do
		d=$BASE
		[ $v = new ] && d=$NEW
		timeout 60 ncu --kernel-name-base demangled -k regex:ck_put -c 1 --section SpeedOfLight \
			--section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis \
			"$d/gpu_bench.bin" --only cuckoo:32:8 --modes direct --reps 0 --no-ceilings --fills 0.9 \
			> "$O/ncu-$v.txt" 2>&1 || echo "ncu $v failed"
	done
fi
