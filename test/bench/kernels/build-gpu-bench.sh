#!/bin/sh
# Build the GPU benchmark and the GPU-vs-CPU differential test without
# PostgreSQL: kernels/*/*.c with cc, kernels/gpu/*.cu with nvcc (the Makefile's
# flags), linked against the static CUDA runtime.
#
#   test/bench/kernels/build-gpu-bench.sh [BUILD_DIR]     (default test/bench/build)
#
# Produces BUILD_DIR/gpu_bench.bin, BUILD_DIR/test_gpu_vs_cpu.bin and
# BUILD_DIR/test_same_slots.bin (the two differential tests of the GPU
# kernels against the CPU), and BUILD_DIR/cuco_bench.bin when CUCO_INCLUDE
# names cuCollections' include folder (test/bench/kernels/cuco_bench.cu).
# EXTRA_NVCC_FLAGS are added to every nvcc compile (e.g. -D variants).
set -eu
cd "$(dirname "$0")/../../.."
OUT=${1:-test/bench/build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$(command -v nvcc || echo "$CUDA_HOME/bin/nvcc")}
CC=${CC:-cc}
JOBS=${JOBS:-$(nproc)}
NVCC_FLAGS="${EXTRA_NVCC_FLAGS:-} -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -DCPHT_WITH_GPU -Ikernels"
# every kernels C file but the no-CUDA stubs (the Makefile leaves them out too)
KERNEL_C="$(ls kernels/*/*.c | grep -v '^kernels/gpu/gpu_none\.c$')"
mkdir -p "$OUT"

# Compile in parallel, one job per file.
pids=""
for f in kernels/gpu/*.cu; do
	o="$OUT/$(basename "$f" .cu).cu.o"
	( "$NVCC" $NVCC_FLAGS -c "$f" -o "$o" ) &
	pids="$pids $!"
	# crude throttle
	while [ "$(jobs -p | wc -l)" -ge "$JOBS" ]; do sleep 0.2; done
done
for f in $KERNEL_C; do
	"$CC" -O2 -g -std=gnu11 -Wall -Wextra -fPIC -DCPHT_WITH_GPU -Ikernels -c "$f" -o "$OUT/$(basename "$f" .c).o"
done
for t in test_gpu_vs_cpu test_same_slots; do
	"$CC" -O2 -g -std=gnu11 -Wall -Wextra -DCPHT_WITH_GPU -Ikernels -c test/unit/$t.c -o "$OUT/$t.o"
done
if [ -n "${CUCO_INCLUDE:-}" ]; then
	"$NVCC" $NVCC_FLAGS --expt-extended-lambda --expt-relaxed-constexpr -I"$CUCO_INCLUDE" \
		-c test/bench/kernels/cuco_bench.cu -o "$OUT/cuco_bench.o"
fi
"$NVCC" $NVCC_FLAGS -c test/bench/kernels/gpu_bench.cu -o "$OUT/gpu_bench.o"
for p in $pids; do wait "$p"; done

KOBJ="$OUT/*.cu.o"
for f in $KERNEL_C; do KOBJ="$KOBJ $OUT/$(basename "$f" .c).o"; done
LIBS="-L$CUDA_HOME/lib64 -lcudart_static -ldl -lrt -lpthread -lm"
"$NVCC" -gencode arch=compute_90,code=sm_90 -o "$OUT/test_gpu_vs_cpu.bin" "$OUT/test_gpu_vs_cpu.o" $KOBJ $LIBS
"$NVCC" -gencode arch=compute_90,code=sm_90 -o "$OUT/test_same_slots.bin" "$OUT/test_same_slots.o" $KOBJ $LIBS
if [ -n "${CUCO_INCLUDE:-}" ]; then
	"$NVCC" -gencode arch=compute_90,code=sm_90 -o "$OUT/cuco_bench.bin" "$OUT/cuco_bench.o" $LIBS
fi
"$NVCC" -gencode arch=compute_90,code=sm_90 -o "$OUT/gpu_bench.bin" "$OUT/gpu_bench.o" $KOBJ $LIBS
echo "built $OUT/gpu_bench.bin $OUT/test_gpu_vs_cpu.bin $OUT/test_same_slots.bin${CUCO_INCLUDE:+ $OUT/cuco_bench.bin}"
