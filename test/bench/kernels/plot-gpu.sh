#!/bin/sh
# Plot the GPU benchmark CSV (test/bench/kernels/gpu_bench.cu) with gnuplot: one PNG
# per table kind and operation, throughput against fill, one line per slot
# width / bucket size and batch handling (direct or grouped by bucket).
#
#   test/bench/kernels/plot-gpu.sh [CSV] [OUT_DIR]
#     (defaults test/bench/results/gpu-bench.csv, test/bench/results)
set -eu
cd "$(dirname "$0")/../../.."
CSV=${1:-test/bench/results/gpu-bench.csv}
OUT=${2:-test/bench/results}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"
DEVICE=$(awk -F, 'NR == 2 { print $2 }' "$CSV")
DATE=$(awk -F, 'NR == 2 { print $1 }' "$CSV")

# plot TABLE OP POS TITLE FILE
plot() {
	table=$1 op=$2 pos=$3 title=$4 file=$5
	series=$(awk -F, -v t="$table" -v o="$op" -v p="$pos" \
		'$3 == t && $4 == o && ($5 == p || p == "-") && $15 == 1 { print $6 "-" $7 "-" $10 }' "$CSV" | sort -u)
	[ -n "$series" ] || return 0
	cmd=""
	for s in $series; do
		bits=${s%%-*}; rest=${s#*-}; bucket=${rest%-*}; mode=${rest##*-}
		f="$TMP/$table-$op-$pos-$bits-$(echo "$bucket" | tr / _)-$mode.dat"
		awk -F, -v t="$table" -v o="$op" -v p="$pos" -v b="$bits" -v k="$bucket" -v m="$mode" \
			'$3 == t && $4 == o && ($5 == p || p == "-") && $6 == b && $7 == k && $10 == m && $15 == 1 { print $9, $11 }' \
			"$CSV" | sort -n > "$f"
		# one colour per slot width and bucket size; solid: direct, dashed: grouped
		b0=${bucket%%/*}
		i=$(( (bits == 16 ? 0 : bits == 32 ? 3 : 6) + (b0 == 8 ? 0 : b0 == 16 ? 1 : 2) ))
		lc="rgb '$(echo "#1b9e77 #66c2a5 #0b5e46 #d95f02 #fc8d62 #8c3d01 #7570b3 #a6a1e0 #3f3a7a" | cut -d' ' -f$((i + 1)))'"
		dt=1; pt=7; [ "$mode" = direct ] || { dt=2; pt=6; }
		cmd="$cmd${cmd:+, }'$f' using 1:2 with linespoints lc $lc dt $dt pt $pt lw 2 title '$bits-bit $bucket $mode'"
	done
	gnuplot <<GP
set terminal pngcairo size 900,560 noenhanced font ",10"
set output '$OUT/$file'
set title '$title — $DEVICE, $DATE'
set xlabel 'fill factor'
set ylabel 'G keys/s'
set key outside right
set grid
set yrange [0:*]
plot $cmd
GP
}

for t in iceberg cuckoo; do
	plot "$t" put - "$t put (fill an empty table)" "gpu-$t-put.png"
	plot "$t" find 0.5 "$t find, 50% hits" "gpu-$t-find-pos0.5.png"
	plot "$t" find 0 "$t find, all misses" "gpu-$t-find-pos0.png"
	plot "$t" fop 0 "$t find-or-put from empty" "gpu-$t-fop-pos0.png"
	plot "$t" fop 0.5 "$t find-or-put from half full" "gpu-$t-fop-pos0.5.png"
	plot "$t" fop50 - "$t find-or-put, 50% new keys" "gpu-$t-fop50.png"
done
ls "$OUT"/gpu-*.png
