#!/bin/bash
# Streams N distinct keys through cpht_fop_agg into a table created for
# 1000 keys (it grows all the way) and into one created for N keys, on a
# running server (PGHOST, PGPORT, PGUSER, PGDATABASE), and checks that
# every key was reported new exactly once.
#
#   CPHT_STREAM_KEYS=500000000 CPHT_STREAM_DEVICE=gpu test/bench/sql/grow-stream.sh
#
# The statement time of each stream includes PostgreSQL's executor work
# (generating the rows, one aggregate transition per row), which is the
# same for both tables; the same scan into count() measures it.  The table
# calls' own time comes from cpht.trace (the sum over the aggregate's
# batches, growths included); in a backend they overlap the executor, so
# they do not add up to the statement time.  Prints a Markdown table with
# the median of CPHT_STREAM_REPS runs (3 by default).
set -euo pipefail
N=${CPHT_STREAM_KEYS:-500000000}
DEV=${CPHT_STREAM_DEVICE:-auto}
REPS=${CPHT_STREAM_REPS:-3}
KIND=${CPHT_STREAM_KIND:-iceberg}
COUNT=${CPHT_STREAM_COUNT:-1}	# 0: no count() baseline (its column reads 0)

q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -c "CREATE EXTENSION IF NOT EXISTS cpht" >/dev/null

# distinct keys spread over all 64 bits (negative ones too): y = x ^ (x << s)
# is a bijection of 64-bit words (the low s bits stay, the rest follow from
# them), and bigint's << does not check overflow (generate_series of
# bigint bounds: an integer series would shift in 32 bits)
ROWS="SELECT y # (y << 13) AS k FROM (SELECT g # (g << 21) AS y FROM generate_series(1::bigint, $N) g) s0"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run_stream() {			# capacity -> "ms|new|count|grows|info|table ms"
	local out
	out=$(q 2>&1 <<SQL
SET cpht.device = '$DEV';
SELECT cpht_create($1, kind => '$KIND') AS h \gset
SELECT clock_timestamp() AS t0 \gset
SET cpht.trace = on;
SELECT cpht_fop_agg(:h, k) AS new FROM ($ROWS) s \gset
RESET cpht.trace;
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000)
	|| '|' || :new || '|' || cpht_count(:h) || '|' || coalesce(cpht_info(:h)->>'grows', '0')
	|| '|' || (cpht_info(:h)->>'bytes') || '|' || (cpht_info(:h)->>'device_name');
SELECT cpht_drop(:h) \gset
SQL
)
	# psql prints the NOTICE before the row; the row is the last line
	echo "$(tail -1 <<<"$out")|$(sed -n 's/.*table calls \([0-9.]*\) ms.*/\1/p' <<<"$out" | head -1)"
}

run_count() {
	q <<SQL
SELECT clock_timestamp() AS t0 \gset
SELECT count(k) AS c FROM ($ROWS) s \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000);
SQL
}

declare -a floor grown sized grown_t sized_t
for r in $(seq 1 "$REPS"); do
	if [ "$COUNT" = 0 ]; then floor+=(0); else floor+=("$(run_count)"); fi
	g=$(run_stream 1000); grown+=("${g%%|*}"); grown_t+=("${g##*|}")
	s=$(run_stream "$N"); sized+=("${s%%|*}"); sized_t+=("${s##*|}")
	for line in "$g" "$s"; do
		IFS='|' read -r ms new count grows bytes dev tms <<<"$line"
		if [ "$new" != "$N" ] || [ "$count" != "$N" ]; then
			echo "FAILED: $N keys streamed, $new reported new, $count in the table" >&2
			exit 1
		fi
	done
	echo "run $r: count ${floor[-1]} ms; grown ${grown[-1]} ms, table calls ${grown_t[-1]} ms ($(cut -d'|' -f4 <<<"$g") growths, $(cut -d'|' -f5 <<<"$g") bytes); right-sized ${sized[-1]} ms, table calls ${sized_t[-1]} ms ($(cut -d'|' -f5 <<<"$s") bytes); device $(cut -d'|' -f6 <<<"$g")" >&2
done
F=$(printf '%s\n' "${floor[@]}" | median)
G=$(printf '%s\n' "${grown[@]}" | median)
S=$(printf '%s\n' "${sized[@]}" | median)
GT=$(printf '%s\n' "${grown_t[@]}" | median)
ST=$(printf '%s\n' "${sized_t[@]}" | median)
echo "| keys | kind | device | count(k) ms | stream into cpht_create(1000) ms (table calls) | stream into cpht_create($N) ms (table calls) | table calls grown / right-sized |"
echo "|---|---|---|---|---|---|---|"
awk -v n="$N" -v k="$KIND" -v d="$DEV" -v f="$F" -v g="$G" -v s="$S" -v gt="$GT" -v st="$ST" \
	'BEGIN { printf "| %d | %s | %s | %d | %d (%.0f) | %d (%.0f) | %.2f |\n", n, k, d, f, g, gt, s, st, gt / st }'
