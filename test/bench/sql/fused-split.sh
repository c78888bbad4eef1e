#!/usr/bin/env bash
# fused-split.sh — where the time of the fused cpht_fop_new(h, array_agg(x))
# goes, next to cpht_fop_agg over the same rows: EXPLAIN ANALYZE of each,
# medians of CPHT_BENCH_REPS runs, each in a transaction rolled back.
#
#   test/bench/sql/fused-split.sh      (after test/bench/sql/ingest-bench.sh made the data)
#
# Reads ingest-bench.sh's staging rows (ingest_staging) and its shared
# table ingest_seen (a preloaded server), made again from ingest_events as
# ingest-bench.sh makes it where the server lost it (a restart); PGHOST, PGPORT, PGUSER and
# PGDATABASE reach the server, CPHT_BENCH_WORKERS and CPHT_BENCH_REPS as
# there.  Per statement, in ms:
#   total      Execution Time
#   partial    the Partial Aggregate (scan, table calls, serialize), slowest
#              process of the leader and its workers
#   gather     the Gather: the leader's own part, then reading the workers'
#              partial states from the tuple queues
#   finalize   the Finalize Aggregate's own time: deserialize, combine and
#              the final function, in the leader alone, after the Gather
# EXPLAIN ANALYZE times every row of the scan, so totals run above the
# plain statement's; finalize is what the leader does with the keys.
: "${CPHT_BENCH_WORKERS:=4}"
: "${CPHT_BENCH_REPS:=5}"
set -euo pipefail

split() {
	local name=$1 sql=$2
	psql -X -q -v ON_ERROR_STOP=1 -At <<SQL | awk -v n="$name" '
		{ for (i = 1; i <= 4; i++) v[i, NR] = $i; rows = NR }
		END {
			printf "%-20s", n
			for (i = 1; i <= 4; i++) {
				m = 0
				for (r = 1; r <= rows; r++) a[r] = v[i, r] + 0
				# insertion sort, then the median
				for (r = 2; r <= rows; r++) { x = a[r]; k = r - 1; while (k >= 1 && a[k] > x) { a[k + 1] = a[k]; k-- } a[k + 1] = x }
				m = rows % 2 ? a[(rows + 1) / 2] : (a[rows / 2] + a[rows / 2 + 1]) / 2
				printf " %10.1f", m
			}
			printf "\n"
		}' FS='|'
SET max_parallel_workers_per_gather = $CPHT_BENCH_WORKERS;
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.split(q text) RETURNS text LANGUAGE plpgsql AS \$f\$
DECLARE
	j json;
	fin float8;
	g json;
	p json;
	slowest float8;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) ' || q INTO j;
	fin := (j->0->'Plan'->>'Actual Total Time')::float8;
	g := j->0->'Plan'->'Plans'->0;
	p := g->'Plans'->0;
	slowest := (SELECT max((w->>'Actual Total Time')::float8) FROM json_array_elements(coalesce(p->'Workers', '[]')) w);
	slowest := greatest(coalesce(slowest, 0), (p->>'Actual Total Time')::float8);
	RETURN concat_ws('|', j->0->>'Execution Time', slowest, g->>'Actual Total Time',
					 fin - (g->>'Actual Total Time')::float8);
END \$f\$;
$(for _ in $(seq 1 "$CPHT_BENCH_REPS"); do printf 'BEGIN;\nSELECT pg_temp.split(%s);\nROLLBACK;\n' "\$q\$$sql\$q\$"; done)
SQL
}

q() { psql -X -q -v ON_ERROR_STOP=1 -At -c "$1"; }
if ! q "SELECT cpht_count('ingest_seen')" >/dev/null 2>&1; then
	q "SELECT cpht_drop(cpht_open('ingest_seen'))" >/dev/null 2>&1 || true
	rows=$(q "SELECT count(*) FROM ingest_staging")
	q "SELECT cpht_create($((rows * 3 / 4 + rows * 3 / 16)), name => 'ingest_seen')" >/dev/null
	q "SELECT cpht_fop_agg('ingest_seen', id) FROM ingest_events" >/dev/null
fi
echo "== $(q "SELECT count(*) FROM ingest_staging") staging rows, ingest_seen holds $(q "SELECT cpht_count('ingest_seen')") keys, $CPHT_BENCH_WORKERS workers, medians of $CPHT_BENCH_REPS (ms)"
printf '%-20s %10s %10s %10s %10s\n' statement total partial gather finalize
split fop_agg_name "SELECT cpht_fop_agg('ingest_seen', id) FROM ingest_staging"
split fop_new_array_name "SELECT cardinality(cpht_fop_new('ingest_seen', array_agg(id))) FROM ingest_staging"
