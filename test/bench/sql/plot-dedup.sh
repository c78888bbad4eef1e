#!/usr/bin/env bash
# plot-dedup.sh — bar charts of the deduplication benchmark CSVs
# (method,rows,seconds as written by dedup-bench.sh), one PNG per CSV and
# row count, log scale.   test/bench/sql/plot-dedup.sh results/dedup-cpu.csv ...
set -euo pipefail
for csv in "$@"; do
	for rows in $(tail -n +2 "$csv" | cut -d, -f2 | sort -un); do
		data=$(mktemp)
		awk -F, -v r="$rows" 'NR > 1 && $2 == r && $3 > 0 { printf "\"%s\" %s\n", $1, $3 }' "$csv" >"$data"
		png="${csv%.csv}-${rows}.png"
		gnuplot <<GP
set terminal pngcairo noenhanced size 1100,520 font ",10"
set output "$png"
set title "Deduplicating $rows staging rows against $((rows / 2)) seen ids ($(basename "$csv" .csv))"
set style fill solid 0.8
set boxwidth 0.6
set logscale y
set ylabel "seconds (log scale)"
set xtics rotate by -25 left
set grid ytics
unset key
plot "$data" using 0:2:xtic(1) with boxes lc rgb "#3b6ea8", "" using 0:2:(sprintf("%.2f", \$2)) with labels offset 0,0.7
GP
		rm -f "$data"
		echo "wrote $png"
	done
done
