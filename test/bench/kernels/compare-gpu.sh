#!/bin/sh
# The benchmark guard, on a machine with a GPU: runs gpu_bench RUNS times
# (default 3; `--quick --modes direct` unless options are given) and
# compares each row's median with the committed figures of the same GPU
# model (test/bench/kernels/compare-gpu.py; rows below 0.97 times them fail).
#
#   test/bench/kernels/compare-gpu.sh [gpu_bench options]
#   RUNS=5 BUILD_DIR=... OUT_DIR=... MIN=0.97 test/bench/kernels/compare-gpu.sh
#
# Builds the benchmark first unless BUILD_DIR holds it.  Exit status: that
# of compare-gpu.py (0 passed, 1 rows below, 2 no reference for this GPU).
set -u
cd "$(dirname "$0")/../../.."
BUILD=${BUILD_DIR:-test/bench/build}
OUTD=${OUT_DIR:-$BUILD/compare}
RUNS=${RUNS:-3}
MIN=${MIN:-0.97}
[ $# -gt 0 ] || set -- --quick --modes direct
if [ ! -x "$BUILD/gpu_bench.bin" ]; then
	test/bench/kernels/build-gpu-bench.sh "$BUILD" || exit 1
fi
mkdir -p "$OUTD"
files=""
i=1
while [ "$i" -le "$RUNS" ]; do
	"$BUILD/gpu_bench.bin" "$@" --csv "$OUTD/run-$i.csv" 2> "$OUTD/run-$i.log" || {
		echo "gpu_bench run $i failed (see $OUTD/run-$i.log)"; exit 1; }
	files="$files $OUTD/run-$i.csv"
	i=$((i + 1))
done
exec python3 test/bench/kernels/compare-gpu.py --min "$MIN" $files
