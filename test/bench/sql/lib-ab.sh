#!/usr/bin/env bash
# lib-ab.sh — two (or more) builds of cpht side by side on one server and
# the same data: ingest-bench.sh's patterns run under each build in turn,
# the order alternating from round to round, and the medians printed next
# to each other.
#
# Builds of one SQL version: only cpht.so is swapped.
#   CPHT_AB_LIBS="before=/tmp/old/cpht.so after=./cpht.so" \
#   CPHT_AB_LIBDIR=/path/to/pkglibdir \
#   CPHT_AB_RESTART="pg_ctl -D /path/to/data -m fast restart" \
#   CPHT_BENCH_ROWS=6000000 CPHT_BENCH_WORKERS=2 CPHT_BENCH_DEVICE=cpu \
#   test/bench/sql/lib-ab.sh
#
# Builds of different SQL versions: whole built source trees, installed.
#   CPHT_AB_TREES="before=/tmp/base after=." \
#   CPHT_AB_RESTART="pg_ctl -D /path/to/data -m fast restart" \
#   CPHT_BENCH_ROWS=6000000 CPHT_BENCH_WORKERS=2 CPHT_BENCH_DEVICE=cpu \
#   test/bench/sql/lib-ab.sh
#
# The server must be one of its own (it is restarted for each build, with
# cpht in shared_preload_libraries so that the shared-table patterns run).
# With CPHT_AB_LIBS each build is copied over CPHT_AB_LIBDIR/cpht.so and
# CPHT_AB_RESTART restarts the server; those builds must share one SQL
# version (the extension is created once).
#
# With CPHT_AB_TREES (one or the other, not both; no CPHT_AB_LIBDIR) the
# builds are built source trees, of any SQL version.  Each run first runs
# `make install` in its tree (into the PostgreSQL that pg_config, or
# PG_CONFIG, names; the output goes to a log, whose end is printed when it
# fails), restarts the server, then in the benchmark database runs DROP
# EXTENSION IF EXISTS cpht CASCADE and CREATE EXTENSION cpht (the tree's
# default version, printed with the run).  The staging data are plain
# tables and stay; ingest-bench.sh creates and seeds its cpht tables again
# in every run.  Nothing else in that database may depend on the
# extension: the CASCADE drops it.  Nothing else may install cpht
# meanwhile: run the script under a lock that installs take too (flock -o;
# the restart runs with descriptors above 2 closed, so that the server
# does not keep such a lock).  A pattern that one build's SQL lacks (those
# by name, such as fop_agg_name, need 0.4) fails its run and the whole
# comparison: leave it out of CPHT_AB_PATTERNS.  Paths of either mode are
# taken from the repository root.
#
# PGHOST, PGPORT, PGUSER, PGDATABASE reach the server, as for
# ingest-bench.sh, whose CPHT_BENCH_* settings pass through
# (CPHT_BENCH_KEEP_DATA=1 is set after the first run: every run reads the
# same staging rows).  Medians are of CPHT_BENCH_REPS repetitions per run;
# with several rounds the median of the runs' medians is printed.  With
# CPHT_AB_SPLIT=1 each run also takes fused-split.sh's EXPLAIN ANALYZE
# split of the fused statement and of cpht_fop_agg (ms; rows split:...),
# which calls shared tables by name (0.4); CPHT_AB_SPLIT=0 leaves it out.
: "${CPHT_AB_LIBS:=}"
: "${CPHT_AB_TREES:=}"
: "${CPHT_AB_LIBDIR:=}"
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
if [ -n "$CPHT_AB_LIBS" ] && [ -n "$CPHT_AB_TREES" ]; then
	echo "lib-ab: CPHT_AB_LIBS and CPHT_AB_TREES are one or the other, not both" >&2
	exit 2
elif [ -n "$CPHT_AB_TREES" ]; then
	MODE=trees
	read -r -a LIBS <<<"$CPHT_AB_TREES"
elif [ -n "$CPHT_AB_LIBS" ]; then
	MODE=libs
	read -r -a LIBS <<<"$CPHT_AB_LIBS"
	: "${CPHT_AB_LIBDIR:?CPHT_AB_LIBDIR: the directory the server loads cpht.so from}"
else
	echo "lib-ab: CPHT_AB_LIBS (label=path/to/cpht.so ...) or CPHT_AB_TREES (label=path/to/tree ...), two or more" >&2
	exit 2
fi
if [ "${#LIBS[@]}" -lt 2 ]; then
	echo "lib-ab: CPHT_AB_${MODE^^} needs two builds or more" >&2
	exit 2
fi
for l in "${LIBS[@]}"; do
	if [ "$MODE" = libs ] && { [[ "$l" != *=* ]] || [ ! -f "${l#*=}" ]; }; then
		echo "lib-ab: '$l' is not label=path of a file" >&2
		exit 2
	fi
	if [ "$MODE" = trees ] && { [[ "$l" != *=* ]] || [ ! -f "${l#*=}/Makefile" ] || [ ! -f "${l#*=}/cpht.control" ]; }; then
		echo "lib-ab: '$l' is not label=path of a cpht source tree" >&2
		exit 2
	fi
	if [ "$MODE" = trees ] && [ ! -f "${l#*=}/cpht.so" ]; then
		echo "lib-ab: '${l#*=}' is not built (no cpht.so): run make there first" >&2
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
		if [ "$MODE" = libs ]; then
			# a new file renamed into place: the running server keeps the
			# one it has mapped until the restart
			cp "${l#*=}" "$CPHT_AB_LIBDIR/cpht.so.ab-new"
			mv -f "$CPHT_AB_LIBDIR/cpht.so.ab-new" "$CPHT_AB_LIBDIR/cpht.so"
		else
			# install replaces cpht.so by a new file too
			log="$TMP/install-$label-$round.log"
			if ! make -C "${l#*=}" install >"$log" 2>&1; then
				echo "lib-ab: make install in ${l#*=} ($label) failed; its last lines:" >&2
				tail -n 20 "$log" >&2
				exit 1
			fi
		fi
		# the server the restart starts must not inherit this script's
		# descriptors: a lock taken around the script (flock) would be
		# held by the server, long after the script ends
		(
			for fd in /proc/self/fd/*; do
				fd=${fd##*/}
				if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
			done
			eval "$CPHT_AB_RESTART"
		) >/dev/null
		up=0
		for _ in $(seq 1 60); do
			psql -X -q -At -c "SELECT 1" >/dev/null 2>&1 && { up=1; break; }
			sleep 1
		done
		if [ "$up" = 0 ]; then
			echo "lib-ab: the server did not answer within 60 s of CPHT_AB_RESTART ($label)" >&2
			exit 1
		fi
		version=""
		if [ "$MODE" = trees ]; then
			# this build's SQL: the staging tables are plain tables and
			# stay; ingest-bench.sh makes its cpht tables in every run
			out=$(psql -X -q -v ON_ERROR_STOP=1 -At -c "SET client_min_messages = warning" \
				-c "DROP EXTENSION IF EXISTS cpht CASCADE" \
				-c "CREATE EXTENSION cpht" \
				-c "SELECT extversion FROM pg_extension WHERE extname = 'cpht'" 2>&1) || {
				echo "lib-ab: creating the extension of $label again failed: $out" >&2
				exit 1
			}
			version=" (cpht $(tail -n 1 <<<"$out"))"
		fi
		echo "== round $round: $label$version"
		CPHT_BENCH_ONLY="$CPHT_AB_PATTERNS" CPHT_BENCH_KEEP_DATA=$KEEP \
			CPHT_BENCH_OUT="$TMP/$label-$round.csv" test/bench/sql/ingest-bench.sh | grep -v '^== '
		KEEP=1
		if [ "$CPHT_AB_SPLIT" = 1 ]; then
			test/bench/sql/fused-split.sh | tee "$TMP/split-$label-$round.txt" | grep -v '^== '
			awk -v l="$label" -v r="$round" 'NR > 2 {
				print l "," r ",split:" $1 ":total," $2 / 1000
				print l "," r ",split:" $1 ":finalize," $5 / 1000 }' "$TMP/split-$label-$round.txt" >>"$CPHT_AB_OUT"
		fi
		# the device column is quoted and may hold commas (a reason why no
		# GPU is usable): emptied before the fields are counted
		tail -n +2 "$TMP/$label-$round.csv" | awk -F, -v l="$label" -v r="$round" \
			'{ gsub(/"[^"]*"/, "\"\"") } $6 != "" { print l "," r "," $1 "," $6 }' >>"$CPHT_AB_OUT"
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
