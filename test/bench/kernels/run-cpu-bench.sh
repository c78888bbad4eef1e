#!/usr/bin/env bash
# run-cpu-bench.sh — throughput of the CPU implementation versus fill factor
# for each layout (test/bench/kernels/cpu_bench.c), as CSV and a PNG per operation.
#
#   test/bench/kernels/run-cpu-bench.sh [log2 primary slots = 22] [reps = 3]
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=test/bench/results
mkdir -p "$out"
${CC:-gcc} -O2 -std=gnu11 -Wall -Ikernels -o test/bench/kernels/cpu_bench.bin test/bench/kernels/cpu_bench.c \
	kernels/*/*.c -lpthread
test/bench/kernels/cpu_bench.bin "${1:-22}" "${2:-3}" | tee "$out/cpu-bench.csv"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for op in put find fop; do
	plots=""
	for layout in "iceberg 8/4" "iceberg 16/8" "iceberg 32/16" "cuckoo 8" "cuckoo 16" "cuckoo 32"; do
		f="$tmp/$op-${layout//[ \/]/_}"
		# put: the one series; find: 50 % hits; fop: 50 % new keys
		awk -F, -v l="$layout" -v op="$op" '$1 == l && $2 == op && $5 != "FULL" && ($3 == "" || $3 == 50) { print $4, $5 }' \
			"$out/cpu-bench.csv" >"$f"
		[ -s "$f" ] && plots="$plots${plots:+, }\"$f\" using 1:2 with linespoints title \"$layout\""
	done
	gnuplot <<GP
set terminal pngcairo noenhanced size 900,520 font ",10"
set output "$out/cpu-$op.png"
set title "CPU $op versus fill ($(nproc) cores; find: 50 % hits, fop: 50 % new keys)"
set xlabel "fill"
set ylabel "million keys/s"
set grid
set key outside right
plot $plots
GP
done
echo "wrote $out/cpu-bench.csv and $out/cpu-{put,find,fop}.png"
