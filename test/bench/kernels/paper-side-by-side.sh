#!/bin/sh
# The compact-hashing paper's own benchmark (`rates`, from its authors'
# repository, github.com/System-Verification-Lab/compact-parallel-hash-tables)
# and cpht's gpu_bench, one after the other on one GPU, then the
# comparison best against best at no more slot memory (compare-paper.py).
#
#   test/bench/kernels/paper-side-by-side.sh PAPER_CHECKOUT ARGPARSE_INCLUDE [OUT_DIR]
#
# PAPER_CHECKOUT: a checkout of that repository; ARGPARSE_INCLUDE: the
# include folder of p-ranav/argparse (>= 3.0), which `rates` reads its
# options with.  Both tables: 2^27 primary + 2^24 secondary slots, keys
# below 2^37 (unique_keys.c), 3 measurements of the paper's, medians of 3
# of cpht's.  Needs BUILD_DIR/gpu_bench.bin (build-gpu-bench.sh).
set -eu
cd "$(dirname "$0")/../../.."
PAPER=$1
ARGPARSE=$2
OUT=${3:-test/bench/build/paper}
BUILD=${BUILD_DIR:-test/bench/build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$(command -v nvcc || echo "$CUDA_HOME/bin/nvcc")}
mkdir -p "$OUT"
[ -x "$BUILD/gpu_bench.bin" ] || test/bench/kernels/build-gpu-bench.sh "$BUILD"
# its own flags (meson.build), for this GPU
(cd "$PAPER" && "$NVCC" -O3 -std=c++20 -gencode arch=compute_90,code=sm_90 --expt-relaxed-constexpr \
	--extended-lambda -DNDEBUG -Iinclude -Ibenchmarks -I"$ARGPARSE" \
	benchmarks/rates.cu benchmarks/benchmarks.cu -o "$OLDPWD/$OUT/rates.bin")
cc -O2 -o "$OUT/unique_keys.bin" test/bench/kernels/unique_keys.c
# rates reads twice as many keys as the iceberg table has slots
"$OUT/unique_keys.bin" $(( 2 * ((1 << 27) + (1 << 24)) )) 37 "$OUT/keys.bin"
"$OUT/rates.bin" -p 27 -s 24 -w 37 -n 3 "$OUT/keys.bin" > "$OUT/paper-rates.csv"
rm -f "$OUT/keys.bin"
"$BUILD/gpu_bench.bin" --reps 3 --csv "$OUT/gpu-bench.csv"
python3 test/bench/kernels/compare-paper.py "$OUT/paper-rates.csv" "$OUT/gpu-bench.csv" --rows
