#!/usr/bin/env bash
# lib-ab.sh — two (or more) builds of cpht.so side by side on one server and
# the same data: ingest-bench.sh's patterns run under each build in turn,
# the order alternating from round to round, and the medians printed next
# to each other.
#
#   CPHT_AB_LIBS="before=/tmp/old/cpht.so after=./cpht.so" \
#   CPHT_AB_LIBDIR=/path/to/pkglibdir \
#   CPHT_AB_RESTART="pg_ctl -D /path/to/data -m fast restart" \
#   CPHT_BENCH_ROWS=6000000 CPHT_BENCH_WORKERS=2 CPHT_BENCH_DEVICE=cpu \
#   test/bench/sql/lib-ab.sh
#
# The server must be one of its own (it is restarted for each build, with
# cpht in shared_preload_libraries so that the shared-table patterns run):
# each build is copied over CPHT_AB_LIBDIR/cpht.so and CPHT_AB_RESTART
# restarts the server.  The builds must share one SQL version (the
# extension is created once).  PGHOST, PGPORT, PGUSER, PGDATABASE reach it,
# as for ingest-bench.sh, whose CPHT_BENCH_* settings pass through
# (CPHT_BENCH_KEEP_DATA=1 is set after the first run: every run reads the
# same staging rows).  Medians are of CPHT_BENCH_REPS repetitions per run;
# with several rounds the median of the runs' medians is printed.  With
# CPHT_AB_SPLIT=1 each run also takes fused-split.sh's EXPLAIN ANALYZE
# split of the fused statement and of cpht_fop_agg (ms; rows split:...).
: "${CPHT_AB_LIBS:?CPHT_AB_LIBS: label=path/to/cpht.so ... (two or more)}"
: "${CPHT_AB_LIBDIR:?CPHT_AB_LIBDIR: the directory the server loads cpht.so from}"
: "${CPHT_AB_RESTART:?CPHT_AB_RESTART: a command that restarts the server}"
: "${CPHT_AB_ROUNDS:=1}"
: "${CPHT_AB_PATTERNS:=count_parallel fop_agg_name fop_new_array_name}"
: "${CPHT_AB_SPLIT:=1}"               # 1: also fused-split.sh's medians (finalize etc.)
: "${CPHT_AB_OUT:=}"
set -euo pipefail

cd "$(dirname "$0")/../../.."
if [ -z "$CPHT_AB_OUT" ]; then
	mkdir -p test/bench/results
	CPHT_AB_OUT=test/bench/results/lib-ab-$(date -u +%Y%m%d-%H%M%S).csv
fi
read -r -a LIBS <<<"$CPHT_AB_LIBS"
if [ "${#LIBS[@]}" -lt 2 ]; then
	echo "lib-ab: CPHT_AB_LIBS needs two builds or more" >&2
	exit 2
fi
for l in "${LIBS[@]}"; do
	if [[ "$l" != *=* ]] || [ ! -f "${l#*=}" ]; then
		echo "lib-ab: '$l' is not label=path of a file" >&2
		exit 2
	fi
done
KEEP=${CPHT_BENCH_KEEP_DATA:-0}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "label,round,pattern,median_s" >"$CPHT_AB_OUT"
for round in $(seq 1 "$CPHT_AB_ROUNDS"); do
	order=("${LIBS[@]}")
	if [ $((round % 2)) -eq 0 ]; then
		# every other round the other way round
		mapfile -t order < <(printf '%s\n' "${LIBS[@]}" | tac)
	fi
	for l in "${order[@]}"; do
		label=${l%%=*}
		# a new file renamed into place: the running server keeps the one
		# it has mapped until the restart
		cp "${l#*=}" "$CPHT_AB_LIBDIR/cpht.so.ab-new"
		mv -f "$CPHT_AB_LIBDIR/cpht.so.ab-new" "$CPHT_AB_LIBDIR/cpht.so"
		eval "$CPHT_AB_RESTART" >/dev/null
		for _ in $(seq 1 60); do
			psql -X -q -At -c "SELECT 1" >/dev/null 2>&1 && break
			sleep 1
		done
		echo "== round $round: $label"
		CPHT_BENCH_ONLY="$CPHT_AB_PATTERNS" CPHT_BENCH_KEEP_DATA=$KEEP \
			CPHT_BENCH_OUT="$TMP/$label-$round.csv" test/bench/sql/ingest-bench.sh | grep -v '^== '
		KEEP=1
		if [ "$CPHT_AB_SPLIT" = 1 ]; then
			test/bench/sql/fused-split.sh | tee "$TMP/split-$label-$round.txt" | grep -v '^== '
			awk -v l="$label" -v r="$round" 'NR > 2 {
				print l "," r ",split:" $1 ":total," $2 / 1000
				print l "," r ",split:" $1 ":finalize," $5 / 1000 }' "$TMP/split-$label-$round.txt" >>"$CPHT_AB_OUT"
		fi
		tail -n +2 "$TMP/$label-$round.csv" | awk -F, -v l="$label" -v r="$round" \
			'$6 != "" { print l "," r "," $1 "," $6 }' >>"$CPHT_AB_OUT"
	done
done

# one line per pattern, one column per build: the median of its runs' medians
echo
printf '%-34s' "pattern (seconds)"
for l in "${LIBS[@]}"; do printf ' %12s' "${l%%=*}"; done
echo
SPLITS=""
if [ "$CPHT_AB_SPLIT" = 1 ]; then
	SPLITS="split:fop_agg_name:total split:fop_new_array_name:total split:fop_agg_name:finalize split:fop_new_array_name:finalize"
fi
for p in $CPHT_AB_PATTERNS $SPLITS; do
	printf '%-34s' "$p"
	for l in "${LIBS[@]}"; do
		m=$(awk -F, -v l="${l%%=*}" -v p="$p" '$1 == l && $3 == p { print $4 }' "$CPHT_AB_OUT" | sort -g |
			awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else printf "%.4f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
		printf ' %12s' "$m"
	done
	echo
done
echo "== written to $CPHT_AB_OUT"
