#!/bin/bash
# array_agg into the array functions (docs/array-agg.md): medians of RUNS
# runs (default 3) of each statement, in ms, against the server that psql
# reaches (PGHOST, PGPORT, PGUSER, PGDATABASE), with
# max_parallel_workers_per_gather = WORKERS (default 2).  Each run creates a
# fresh private table :h on the CPU.  ROWS staging rows (default 5M) with
# 3/4 of them distinct ids are made first unless KEEP=1.  The *_serial rows
# run without workers (cpht_array_agg in one process); the same statements
# before cpht_array_agg ran as array_agg does, in one process.
#
#   test/bench/sql/array-agg-bench.sh
#   ROWS=30000000 WORKERS=8 RUNS=5 test/bench/sql/array-agg-bench.sh
set -euo pipefail
: "${ROWS:=5000000}" "${WORKERS:=2}" "${RUNS:=3}" "${KEEP:=0}"
q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

if [ "$KEEP" != 1 ]; then
	distinct=$((ROWS * 3 / 4))
	q -c "DROP TABLE IF EXISTS staging" \
	  -c "CREATE TABLE staging AS SELECT ((g::bigint * 2654435761) % $distinct) * 7919 AS id FROM generate_series(1, $ROWS) g" \
	  -c "VACUUM ANALYZE staging"
fi

run() {
	local name=$1 sql=$2 ts=() t
	for _ in $(seq "$RUNS"); do
		t=$(q -At <<SQL | grep -o 'Time: [0-9.]*' | tail -1 | cut -d' ' -f2
SET max_parallel_workers_per_gather = $WORKERS;
SET cpht.device = cpu;
SELECT cpht_create($ROWS) AS h \gset
\timing on
$sql
SQL
)
		ts+=("$t")
	done
	printf '%-22s %10s ms   (runs %s)\n' "$name" \
		"$(printf '%s\n' "${ts[@]}" | sort -n | sed -n "$(((RUNS + 1) / 2))p")" "${ts[*]}"
}
run count_id "SELECT count(id) FROM staging;"
run count_id_serial "SET max_parallel_workers_per_gather = 0; SELECT count(id) FROM staging;"
run array_agg "SELECT cardinality(array_agg(id)) FROM staging;"
run cpht_array_agg "SELECT cardinality(cpht_array_agg(id)) FROM staging;"
run fop_count_true "SELECT cardinality(array_positions(cpht_fop(:h, array_agg(id)), true)) FROM staging;"
run fop_count_true_serial "SET max_parallel_workers_per_gather = 0; SELECT cardinality(array_positions(cpht_fop(:h, array_agg(id)), true)) FROM staging;"
run fop_new "SELECT cardinality(cpht_fop_new(:h, array_agg(id))) FROM staging;"
run fop_new_serial "SET max_parallel_workers_per_gather = 0; SELECT cardinality(cpht_fop_new(:h, array_agg(id))) FROM staging;"
run fop_new_unnest "SELECT count(*) FROM (SELECT unnest(cpht_fop_new(:h, array_agg(id))) FROM staging) s;"
run unnest "SELECT count(*) FROM (SELECT unnest(a) FROM (SELECT cpht_array_agg(id) a FROM staging) s) z;"
