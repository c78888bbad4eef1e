#!/usr/bin/env bash
# dedup-bench.sh — deduplicating an ingest against ids already seen: cpht
# versus native PostgreSQL, on one server, same data, one after the other.
#
#   test/bench/sql/dedup-bench.sh [ROWS] [SEEN] [DEVICE] [OUT.csv]
#
# ROWS staging rows (default 10,000,000) hold 0.75*ROWS distinct ids, of
# which SEEN (default ROWS/2) are in `seen` and the rest are new.  DEVICE is
# cpht.device (cpu, gpu or auto).  Needs PGHOST/PGPORT/PGUSER of a running
# server with cpht installed.
# Prints a table; appends "method,rows,seconds" lines to OUT.csv.
# Set SKIP_NATIVE=1 to time cpht alone, SKIP_SLOW=1 to skip ON CONFLICT.
set -euo pipefail
ROWS=${1:-10000000}
SEEN=${2:-$((ROWS / 2))}
DEVICE=${3:-auto}
CSV=${4:-/dev/null}
DISTINCT=$((ROWS * 3 / 4))
DB=${PGDATABASE:-postgres}
export PGOPTIONS="-c cpht.device=$DEVICE -c work_mem=1GB -c max_parallel_workers_per_gather=0"

q() { psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -At -c "$1"; }

# Run a statement, print and record its wall time.
timed() {
	local name=$1 sql=$2 t0 t1 out secs
	t0=$(date +%s.%N)
	out=$(q "$sql")
	t1=$(date +%s.%N)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	printf '%-40s %10.3f s   %s\n' "$name" "$secs" "$out"
	echo "$name,$ROWS,$secs" >>"$CSV"
}

echo "== data: $ROWS staging rows, $DISTINCT distinct ids, $SEEN seen, device $DEVICE"
q "CREATE EXTENSION IF NOT EXISTS cpht"
q "DROP TABLE IF EXISTS seen, staging, seen_conflict, events"
# ids are scattered 64-bit values (a hash of a counter), as
# generated keys look; staging repeats ids so a quarter of its rows are duplicates.
q "CREATE UNLOGGED TABLE seen (id bigint PRIMARY KEY)"
q "CREATE UNLOGGED TABLE staging (id bigint, payload int)"
q "INSERT INTO seen SELECT hashint8extended(i, 7) FROM generate_series(1, $SEEN) i"
q "INSERT INTO staging SELECT hashint8extended(1 + (r % $DISTINCT), 7), r::int
     FROM (SELECT CASE WHEN g <= $DISTINCT THEN g - 1 ELSE (g * 2654435761) % $DISTINCT END AS r
           FROM generate_series(1, $ROWS) g) s"
q "VACUUM ANALYZE seen"
q "VACUUM ANALYZE staging"
q "CREATE UNLOGGED TABLE events (LIKE staging)"

timed "count(id)" "SELECT count(id) FROM staging"
if [ "$ROWS" -le 60000000 ]; then
	timed "array_agg(id)" "SELECT cardinality(array_agg(id)) FROM staging"
fi

if [ "${SKIP_NATIVE:-0}" != 1 ]; then
	timed "count(DISTINCT id)" "SELECT count(DISTINCT id) FROM staging"
	timed "new ids: DISTINCT + NOT EXISTS" "SELECT count(*) FROM (SELECT DISTINCT id FROM staging) s
		WHERE NOT EXISTS (SELECT 1 FROM seen WHERE seen.id = s.id)"
	if [ "${SKIP_SLOW:-0}" != 1 ]; then
		q "CREATE UNLOGGED TABLE seen_conflict (id bigint PRIMARY KEY); INSERT INTO seen_conflict SELECT id FROM seen"
		timed "INSERT ... ON CONFLICT DO NOTHING" "INSERT INTO seen_conflict SELECT id FROM staging ON CONFLICT DO NOTHING"
		q "DROP TABLE seen_conflict"
	fi
fi

# cpht: a table sized for every id, loaded with `seen`, then the dedup.
# Each measurement runs in one psql session, since tables belong to it.
cap=$((DISTINCT + DISTINCT / 10))
script=$(mktemp)
trap 'rm -f "$script"' EXIT
cat >"$script" <<SQL
\set QUIET on
\pset tuples_only on
\pset format unaligned
CREATE FUNCTION pg_temp.clock() RETURNS numeric LANGUAGE sql AS 'SELECT extract(epoch FROM clock_timestamp())::numeric';
SELECT cpht_drop_all();
SELECT pg_temp.clock() AS t0 \gset
SELECT cpht_create($cap) AS h \gset
SELECT cpht_fop_agg(:h, id) FROM seen \g /dev/null
SELECT pg_temp.clock() AS t1 \gset
SELECT format('#|%s|%s', 'cpht: load seen (cpht_fop_agg)', round(:t1 - :t0, 3));
$( [ "$ROWS" -le 60000000 ] && cat <<ARR
SELECT pg_temp.clock() AS t0 \gset
SELECT cardinality(cpht_fop_new(:h, array_agg(id))) AS n FROM staging \gset
SELECT pg_temp.clock() AS t1 \gset
SELECT format('#|%s|%s|%s new', 'cpht: new ids via cpht_fop_new(array_agg)', round(:t1 - :t0, 3), :n);
SELECT cpht_drop(:h);
SELECT cpht_create($cap) AS h \gset
SELECT cpht_fop_agg(:h, id) FROM seen \g /dev/null
ARR
)
SELECT pg_temp.clock() AS t0 \gset
SELECT count(id) AS n FROM staging \gset
SELECT pg_temp.clock() AS t1 \gset
SELECT format('#|%s|%s|%s rows', 'count(id) in the same session', round(:t1 - :t0, 3), :n);
SELECT pg_temp.clock() AS t0 \gset
SELECT cpht_fop_agg(:h, id) AS n FROM staging \gset
SELECT pg_temp.clock() AS t1 \gset
SELECT format('#|%s|%s|%s new', 'cpht: count new via cpht_fop_agg', round(:t1 - :t0, 3), :n);
SELECT cpht_drop(:h);
SELECT cpht_create($cap) AS h \gset
SELECT cpht_fop_agg(:h, id) FROM seen \g /dev/null
SELECT pg_temp.clock() AS t0 \gset
INSERT INTO events SELECT * FROM cpht_fop_rows(:h, NULL::staging, 'SELECT * FROM staging');
SELECT pg_temp.clock() AS t1 \gset
SELECT format('#|%s|%s|%s rows', 'cpht: ingest new rows via cpht_fop_rows', round(:t1 - :t0, 3), (SELECT count(*) FROM events));
SELECT format('#|%s|%s|%s', 'cpht: device', 0, cpht_info(:h)->>'device_name');
SQL
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -f "$script" | grep '^#' | while IFS='|' read -r _ name secs extra; do
	printf '%-40s %10.3f s   %s\n' "$name" "$secs" "$extra"
	echo "$name,$ROWS,$secs" >>"$CSV"
done
