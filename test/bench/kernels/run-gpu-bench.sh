#!/bin/sh
# On a machine with a GPU: build (unless the binaries are there), run the
# GPU-vs-CPU differential test, then the benchmark.  Results go to
# RESULTS_DIR (default test/bench/results): gpu-bench.csv, gpu-bench.log,
# test_gpu_vs_cpu.log, nvidia-smi.txt.
#
#   test/bench/kernels/run-gpu-bench.sh [gpu_bench options, e.g. --quick]
#   BENCH_LIMIT=480 bounds the benchmark's seconds (default: none).
set -u
cd "$(dirname "$0")/../../.."
RES=${RESULTS_DIR:-test/bench/results}
BUILD=${BUILD_DIR:-test/bench/build}
mkdir -p "$RES"

if [ ! -x "$BUILD/gpu_bench.bin" ] || [ ! -x "$BUILD/test_gpu_vs_cpu.bin" ]; then
	test/bench/kernels/build-gpu-bench.sh "$BUILD" || exit 1
fi
nvidia-smi > "$RES/nvidia-smi.txt" 2>&1 || true
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv >> "$RES/nvidia-smi.txt" 2>&1 || true

echo "== differential test"
"$BUILD/test_gpu_vs_cpu.bin" > "$RES/test_gpu_vs_cpu.log" 2>&1
rc=$?
cat "$RES/test_gpu_vs_cpu.log"
echo "test_gpu_vs_cpu exit $rc"

echo "== benchmark"
if [ -n "${BENCH_LIMIT:-}" ]; then
	timeout "$BENCH_LIMIT" "$BUILD/gpu_bench.bin" --csv "$RES/gpu-bench.csv" "$@" 2> "$RES/gpu-bench.log"
else
	"$BUILD/gpu_bench.bin" --csv "$RES/gpu-bench.csv" "$@" 2> "$RES/gpu-bench.log"
fi
brc=$?
echo "gpu_bench exit $brc"
grep -E "ceilings|CHECK|FAILED|^[a-z]+ [0-9]+-bit" "$RES/gpu-bench.log" | head -40
exit $(( rc != 0 || brc != 0 ))
