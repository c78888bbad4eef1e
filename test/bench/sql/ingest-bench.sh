#!/usr/bin/env bash
# ingest-bench.sh — the ingest patterns (docs/patterns.md) against PostgreSQL's
# own ways (count(id) as the floor of a scan, the anti-join, INSERT ... ON
# CONFLICT DO NOTHING), on one server, same data, medians of repetitions.
#
#   test/bench/sql/ingest-bench.sh
#
# Runs against a running server (PGHOST, PGPORT, PGUSER, PGDATABASE; a
# superuser, or a role that may create the extension once it exists).  With
# cpht in shared_preload_libraries the set of seen ids is a shared table,
# and cpht_fop_agg runs in parallel workers; on a plain server the parallel
# cpht_fop_agg rows are printed as n/a and the set is a private table.
# cpht_fop_relation and cpht_fop_new_relation read the relation with their
# own parallel scan, into a private table (and a shared one when
# preloaded); so does cpht_insert_new, which then inserts the new rows.
#
# The load against INSERT ... ON CONFLICT DO NOTHING into the keyed events
# table, at a given size, random and time-ordered ids:
#   CPHT_BENCH_ONLY="load_floor_plain load_insert_new on_conflict" \
#   CPHT_BENCH_ROWS=100000000 CPHT_BENCH_IDS=ordered test/bench/sql/ingest-bench.sh
# (the ratio of on_conflict to load_insert_new is printed at the end).
#
# Data: CPHT_BENCH_ROWS staging rows (id bigint, payload int) holding
# 3/4 * ROWS distinct ids, half of which are already in `events` (id bigint
# PRIMARY KEY, payload int; events_unkeyed holds the same rows without an
# index) and in the cpht table; each rep finds the same
# 3/8 * ROWS new ids.  CPHT_BENCH_IDS=random scatters ids over 64 bits (a
# hash of a counter, as generated keys look); ordered keeps them ascending
# (sequence- or snowflake-like), the new ones above the seen ones.
#
# Every statement that changes something runs in a transaction that is
# rolled back, so each rep starts from the same state; only the statement
# is timed (psql's \timing, in the session).  Results go to CPHT_BENCH_OUT
# as CSV (pattern, rows, workers, ids, device, median/min/max seconds,
# reps, the statement's answer) and to the terminal as a table with each
# pattern's time over parallel count(id).
: "${CPHT_BENCH_ROWS:=1000000}"     # staging rows
: "${CPHT_BENCH_WORKERS:=4}"        # max_parallel_workers_per_gather of the parallel rows
: "${CPHT_BENCH_REPS:=3}"           # repetitions of each pattern (the median is reported)
: "${CPHT_BENCH_IDS:=random}"       # random or ordered
: "${CPHT_BENCH_DEVICE:=auto}"      # cpht.device of the tables: auto, gpu or cpu
: "${CPHT_BENCH_SKIP:=}"            # patterns not to run, such as "on_conflict unnest_fop"
: "${CPHT_BENCH_ONLY:=}"            # only these patterns, such as "load_floor_plain load_insert_new on_conflict"
: "${CPHT_BENCH_WORK_MEM:=1GB}"    # work_mem of the timed sessions
: "${CPHT_BENCH_KEEP_DATA:=0}"      # 1: reuse the data of an earlier run of the same size
: "${CPHT_BENCH_OUT:=}"             # default test/bench/results/ingest-<date>.csv
set -euo pipefail

cd "$(dirname "$0")/../../.."
for v in CPHT_BENCH_ROWS CPHT_BENCH_WORKERS CPHT_BENCH_REPS; do
	if ! [[ "${!v}" =~ ^[0-9]+$ ]] || { [ "$v" != CPHT_BENCH_WORKERS ] && [ "${!v}" -eq 0 ]; }; then
		echo "ingest-bench: $v must be a non-negative integer (ROWS and REPS positive), not '${!v}'" >&2
		exit 2
	fi
done
case "$CPHT_BENCH_IDS" in
	random | ordered) ;;
	*) echo "ingest-bench: CPHT_BENCH_IDS must be random or ordered, not '$CPHT_BENCH_IDS'" >&2; exit 2 ;;
esac
case "$CPHT_BENCH_DEVICE" in
	auto | gpu | cpu) ;;
	*) echo "ingest-bench: CPHT_BENCH_DEVICE must be auto, gpu or cpu, not '$CPHT_BENCH_DEVICE'" >&2; exit 2 ;;
esac
ROWS=$CPHT_BENCH_ROWS
W=$CPHT_BENCH_WORKERS
DISTINCT=$((ROWS * 3 / 4))
SEEN=$((DISTINCT / 2))
NEW=$((DISTINCT - SEEN))
if [ -z "$CPHT_BENCH_OUT" ]; then
	mkdir -p test/bench/results
	CPHT_BENCH_OUT=test/bench/results/ingest-$(date -u +%Y%m%d-%H%M%S).csv
fi
export PGOPTIONS="${PGOPTIONS:-} -c cpht.device=$CPHT_BENCH_DEVICE -c client_min_messages=warning"

q() { psql -X -q -v ON_ERROR_STOP=1 -At -c "$1"; }

skipped() {
	[[ " $CPHT_BENCH_SKIP " == *" $1 "* ]] || { [ -n "$CPHT_BENCH_ONLY" ] && [[ " $CPHT_BENCH_ONLY " != *" $1 "* ]]; }
}

# ---- the server and the device ---------------------------------------------
q "CREATE EXTENSION IF NOT EXISTS cpht"
PRELOADED=$(q "SELECT cpht_worker_info()->>'preloaded'")
if [ "$PRELOADED" = true ]; then
	GPU=$(q "SELECT coalesce(cpht_worker_info()->'gpu'->>'name', 'none: ' || coalesce(cpht_worker_info()->'gpu'->>'reason', 'not probed yet'))")
else
	GPU="(plain server: the GPU is probed by the session)"
fi
CORES=$(q "SELECT setting FROM pg_settings WHERE name = 'max_worker_processes'")
echo "== server: $(q 'SHOW server_version'), cpht preloaded: $PRELOADED, worker GPU: $GPU"
echo "== client host: $(nproc) cores$(command -v nvidia-smi >/dev/null 2>&1 && echo ", $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"), max_worker_processes $CORES, max_parallel_workers $(q 'SHOW max_parallel_workers')"
echo "== data: $ROWS staging rows, $DISTINCT distinct $CPHT_BENCH_IDS ids, $SEEN seen, $NEW new; $W parallel workers; median of $CPHT_BENCH_REPS"

# ---- data --------------------------------------------------------------------
if [ "$CPHT_BENCH_IDS" = random ]; then
	IDEXPR="hashint8extended(k, 7)"
else
	IDEXPR="k"
fi
SIG="$ROWS/$CPHT_BENCH_IDS"
if [ "$CPHT_BENCH_KEEP_DATA" = 1 ] && [ "$(q "SELECT obj_description('ingest_staging'::regclass)" 2>/dev/null || true)" = "$SIG" ]; then
	echo "== reusing the data of an earlier run ($SIG)"
else
	q "DROP TABLE IF EXISTS ingest_staging, ingest_events, ingest_events_unkeyed, ingest_new_rows, ingest_new_rows_arrival, ingest_events_copy"
	# staging: ids 1..DISTINCT once each, then ROWS - DISTINCT repeats
	q "CREATE TABLE ingest_staging (id bigint, payload int)"
	q "INSERT INTO ingest_staging
	   SELECT $IDEXPR, g::int
	   FROM (SELECT g, CASE WHEN g <= $DISTINCT THEN g ELSE 1 + (g * 2654435761) % $DISTINCT END AS k
	         FROM generate_series(1, $ROWS) g) s"
	q "CREATE TABLE ingest_events (id bigint PRIMARY KEY, payload int)"
	q "INSERT INTO ingest_events SELECT $IDEXPR, 0 FROM generate_series(1, $SEEN) k"
	# the same rows without an index: events where the cpht table, not a
	# unique index, keeps each id once
	q "CREATE TABLE ingest_events_unkeyed AS SELECT * FROM ingest_events"
	# exactly the rows a load inserts: one per new id (the floor of a load)
	q "CREATE TABLE ingest_new_rows AS
	   SELECT DISTINCT ON (id) id, payload FROM ingest_staging s
	   WHERE NOT EXISTS (SELECT 1 FROM ingest_events e WHERE e.id = s.id) ORDER BY id"
	# the same rows in the order they arrive in staging (payload is the
	# staging row number): the order any load of staging inserts them in
	q "CREATE TABLE ingest_new_rows_arrival AS SELECT * FROM ingest_new_rows ORDER BY payload"
	q "VACUUM ANALYZE ingest_new_rows_arrival"
	q "VACUUM ANALYZE ingest_staging"
	q "VACUUM ANALYZE ingest_events"
	q "VACUUM ANALYZE ingest_events_unkeyed"
	q "VACUUM ANALYZE ingest_new_rows"
	q "COMMENT ON TABLE ingest_staging IS '$SIG'"
fi
if [ "$(q "SELECT count(*) FROM ingest_new_rows")" != "$NEW" ]; then
	echo "ingest-bench: the data holds $(q "SELECT count(*) FROM ingest_new_rows") new ids, not $NEW (hash collisions?)" >&2
fi
NEW=$(q "SELECT count(*) FROM ingest_new_rows")

# The cpht tables, holding the seen ids (committed): a shared one when
# preloaded, and a private one.
CAP=$((DISTINCT + DISTINCT / 4))
SETUP_SHARED=""
if [ "$PRELOADED" = true ]; then
	q "SELECT cpht_drop(cpht_open('ingest_seen'))" >/dev/null 2>&1 || true
	q "SELECT cpht_drop(cpht_open('ingest_seed'))" >/dev/null 2>&1 || true
	q "SELECT cpht_create($CAP, name => 'ingest_seen')" >/dev/null
	q "SELECT cpht_create($CAP, name => 'ingest_seed')" >/dev/null
	q "SELECT cpht_fop_agg(cpht_open('ingest_seen'), id) FROM ingest_events" >/dev/null
	echo "== shared table: $(q "SELECT cpht_info(cpht_open('ingest_seen'))->>'device'"), $(q "SELECT cpht_count(cpht_open('ingest_seen'))") keys"
	# the worker probes the GPU when a table first asks for one
	GPU=$(q "SELECT coalesce(cpht_worker_info()->'gpu'->>'name', 'none: ' || coalesce(cpht_worker_info()->'gpu'->>'reason', 'not probed'))")
	SETUP_SHARED="SELECT cpht_open('ingest_seen') AS h, cpht_open('ingest_seed') AS hs \\gset"
fi
# psql variable :p, a private table holding the seen ids
SETUP_PRIVATE="SELECT cpht_create($CAP) AS p \\gset
SELECT cpht_fop_agg(:p, id) AS ignored FROM ingest_events \\gset"

# ---- timing ------------------------------------------------------------------
declare -A MEDIAN
echo "pattern,rows,workers,ids,device,median_s,min_s,max_s,reps,answer" >"$CPHT_BENCH_OUT"
printf '%-22s %10s %10s %8s  %s\n' pattern median_s min_s x_count answer

# run NAME WORKERS EXPECTED SQL [SETUP]: SQL timed REPS times in a session
# with WORKERS parallel workers, each time in a transaction rolled back
# after it; EXPECTED, when not empty, is the answer every rep must give.
# A rolled-back insert leaves its entries dead in the primary key of
# events, where they would slow every later load: the loads vacuum events
# before each rep, so each starts from the same index.  As a superuser the
# loads also start from a checkpoint: each rep writes a WAL volume that
# would otherwise start one in the middle of a later rep.
CHECKPOINT_SQL=""
if [ "$(q "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")" = t ]; then
	CHECKPOINT_SQL="CHECKPOINT;"
fi
run() {
	local name=$1 workers=$2 expected=$3 sql=$4 setup=${5:-} out times answer stats vacuum=""
	if skipped "$name"; then
		return
	fi
	case $name in
		load_*_unkeyed) vacuum="VACUUM ingest_events_unkeyed; $CHECKPOINT_SQL" ;;
		load_* | on_conflict) vacuum="VACUUM ingest_events; $CHECKPOINT_SQL" ;;
	esac
	out=$(psql -X -q -v ON_ERROR_STOP=1 -At 2>&1 <<SQL
SET max_parallel_workers_per_gather = $workers;
SET work_mem = '$CPHT_BENCH_WORK_MEM';
$SETUP_SHARED
$setup
$(for _ in $(seq 1 "$CPHT_BENCH_REPS"); do printf '%s\nBEGIN;\n\\timing on\n%s;\n\\timing off\nROLLBACK;\n' "$vacuum" "$sql"; done)
SQL
) || { echo "ingest-bench: $name failed: $out" >&2; exit 1; }
	times=$(grep '^Time: ' <<<"$out" | awk '{ print $2 / 1000 }')
	answer=$({ grep -v '^Time: ' <<<"$out" || true; } | sort -u | paste -sd' ')
	if [ -n "$expected" ] && [ "$answer" != "$expected" ]; then
		echo "ingest-bench: $name answered '$answer', expected $expected" >&2
		exit 1
	fi
	stats=$(sort -g <<<"$times" | awk '{ v[NR] = $1 } END {
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f", m, v[1], v[NR] }')
	read -r med min max <<<"$stats"
	MEDIAN[$name]=$med
	local ratio=""
	if [ -n "${MEDIAN[count_parallel]:-}" ]; then
		ratio=$(awk -v a="$med" -v b="${MEDIAN[count_parallel]}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
	fi
	printf '%-22s %10s %10s %8s  %s\n' "$name" "$med" "$min" "$ratio" "$answer"
	echo "$name,$ROWS,$workers,$CPHT_BENCH_IDS,\"$GPU\",$med,$min,$max,$CPHT_BENCH_REPS,$answer" >>"$CPHT_BENCH_OUT"
}

na() {
	printf '%-22s %10s\n' "$1" "n/a ($2)"
	echo "$1,$ROWS,,$CPHT_BENCH_IDS,\"$GPU\",,,,0,n/a: $2" >>"$CPHT_BENCH_OUT"
}

run count_parallel "$W" "$ROWS" "SELECT count(id) FROM ingest_staging"
run count_serial 0 "$ROWS" "SELECT count(id) FROM ingest_staging"

# counting the new ids (they become known; the rollback forgets them)
if [ "$PRELOADED" = true ]; then
	run fop_agg_parallel "$W" "$NEW" "SELECT cpht_fop_agg(:h, id) FROM ingest_staging"
	run fop_agg_serial 0 "$NEW" "SELECT cpht_fop_agg(:h, id) FROM ingest_staging"
	# the shared table by its name (docs/names.md): the plan of :h; and
	# cpht_open in the statement, which is parallel unsafe
	run fop_agg_name "$W" "$NEW" "SELECT cpht_fop_agg('ingest_seen', id) FROM ingest_staging"
	# the same planned as the aggregate it is written as (without the
	# rewrite to cpht_fop_relation's scan, docs/names.md)
	run fop_agg_name_aggregate "$W" "$NEW" "SELECT cpht_fop_agg('ingest_seen', id) FROM ingest_staging" \
		"SET cpht.fop_agg_relation_scan = off;"
	run fop_agg_open_inline "$W" "$NEW" "SELECT cpht_fop_agg(cpht_open('ingest_seen'), id) FROM ingest_staging"
	# the design card's pattern, by name: array_agg gathered in parallel
	# workers (cpht_array_agg in its place, docs/array-agg.md), next to
	# PostgreSQL's own array_agg of the same rows with no cpht
	if [ "$ROWS" -le 60000000 ]; then
		run array_agg_plain "$W" "$ROWS" "SELECT cardinality(array_agg(id)) FROM ingest_staging"
		run fop_array_name "$W" "$NEW" \
			"SELECT cardinality(array_positions(cpht_fop('ingest_seen', array_agg(id)), true)) FROM ingest_staging"
		run fop_new_array_name "$W" "$NEW" \
			"SELECT cardinality(cpht_fop_new('ingest_seen', array_agg(id))) FROM ingest_staging"
	fi
else
	na fop_agg_parallel "plain server: no shared table"
	na fop_agg_serial "plain server: no shared table"
fi
run fop_agg_private 0 "$NEW" "SELECT cpht_fop_agg(:p, id) FROM ingest_staging" "$SETUP_PRIVATE"
if [ "$ROWS" -le 60000000 ]; then
	run fop_new_array 0 "$NEW" \
		"SELECT cardinality(cpht_fop_new(:p, (SELECT array_agg(id) FROM ingest_staging)))" "$SETUP_PRIVATE"
	run unnest_fop 0 "$NEW" \
		"SELECT count(*) FROM (SELECT array_agg(id) AS ids FROM ingest_staging) b,
		   unnest(b.ids, cpht_fop(:p, b.ids)) AS u(id, is_new) WHERE u.is_new" "$SETUP_PRIVATE"
else
	na fop_new_array "more rows than an array holds"
	na unnest_fop "more rows than an array holds"
fi
# the relation-level functions: a parallel heap scan of their own whose
# workers hand the keys to the leader, which calls the table in batches
run fop_relation "$W" "$NEW" "SELECT cpht_fop_relation(:p, 'ingest_staging')" "$SETUP_PRIVATE"
run fop_relation_serial 0 "$NEW" "SELECT cpht_fop_relation(:p, 'ingest_staging')" "$SETUP_PRIVATE"
run new_relation "$W" "$NEW" "SELECT count(*) FROM cpht_fop_new_relation(:p, 'ingest_staging')" "$SETUP_PRIVATE"
if [ "$PRELOADED" = true ]; then
	run fop_relation_shared "$W" "$NEW" "SELECT cpht_fop_relation(:h, 'ingest_staging')"
	run fop_relation_name "$W" "$NEW" "SELECT cpht_fop_relation('ingest_seen', 'ingest_staging')"
	# over a shared table the planner puts a parallel node in the function's
	# place, which the workers run (the count above it too)
	NEW_PLAN=$(psql -X -q -At <<SQL | grep -o 'Custom Scan (cpht new keys)\|Function Scan' | head -1
SET max_parallel_workers_per_gather = $W;
$SETUP_SHARED
EXPLAIN (COSTS OFF) SELECT count(*) FROM cpht_fop_new_relation(:h, 'ingest_staging');
SQL
)
	echo "== new_relation_shared is planned as: ${NEW_PLAN:-?}"
	run new_relation_shared "$W" "$NEW" "SELECT count(*) FROM cpht_fop_new_relation(:h, 'ingest_staging')"
	run new_relation_name "$W" "$NEW" "SELECT count(*) FROM cpht_fop_new_relation('ingest_seen', 'ingest_staging')"
fi
run anti_join "$W" "$NEW" \
	"SELECT count(*) FROM (SELECT DISTINCT id FROM ingest_staging) s
	 WHERE NOT EXISTS (SELECT 1 FROM ingest_events e WHERE e.id = s.id)"

# seeding a set from a relation: every id of events into an empty table
run seed_count_parallel "$W" "$SEEN" "SELECT count(id) FROM ingest_events"
if [ "$PRELOADED" = true ]; then
	run seed_parallel "$W" "$SEEN" "SELECT cpht_fop_agg(:hs, id) FROM ingest_events"
fi
run seed_relation "$W" "$SEEN" "SELECT cpht_fop_relation(:e, 'ingest_events')" \
	"SELECT cpht_create($CAP) AS e \\gset"


# loading the new rows (each new id once) into events
# (each counted through RETURNING, the same small cost for all)
ins() { echo "WITH ins AS ($1 RETURNING 1) SELECT count(*) FROM ins"; }
run load_floor 0 "$NEW" "$(ins "INSERT INTO ingest_events SELECT * FROM ingest_new_rows")"
run load_fop_rows 0 "$NEW" \
	"$(ins "INSERT INTO ingest_events SELECT * FROM cpht_fop_rows(:p, NULL::ingest_staging, 'SELECT * FROM ingest_staging')")" \
	"$SETUP_PRIVATE"
if [ "$PRELOADED" = true ]; then
	run load_fop_rows_shared 0 "$NEW" \
		"$(ins "INSERT INTO ingest_events SELECT * FROM cpht_fop_rows(:h, NULL::ingest_staging, 'SELECT * FROM ingest_staging')")"
fi
# cpht_insert_new: the parallel scan picks the new rows' tids, one TID scan
# inserts them (it returns the count itself, without RETURNING)
run load_insert_new "$W" "$NEW" "SELECT cpht_insert_new(:p, 'ingest_staging', 'ingest_events')" "$SETUP_PRIVATE"
run load_insert_new_serial 0 "$NEW" "SELECT cpht_insert_new(:p, 'ingest_staging', 'ingest_events')" "$SETUP_PRIVATE"
if [ "$PRELOADED" = true ]; then
	run load_insert_new_shared "$W" "$NEW" "SELECT cpht_insert_new(:h, 'ingest_staging', 'ingest_events')"
fi
# the floor without RETURNING, as cpht_insert_new inserts (no answer to
# check): the new rows in id order (the events index grows at its right
# end), and in the order they arrive in staging (with random ids, each
# row goes to a random leaf of the index, as in any load of staging)
run load_floor_plain 0 "" "INSERT INTO ingest_events SELECT * FROM ingest_new_rows"
run load_floor_arrival 0 "" "INSERT INTO ingest_events SELECT * FROM ingest_new_rows_arrival"
run on_conflict 0 "$NEW" "$(ins "INSERT INTO ingest_events SELECT * FROM ingest_staging ON CONFLICT (id) DO NOTHING")"
# events without an index on id: the cpht table is what keeps each id once,
# so the insert pays for the heap alone (ON CONFLICT needs the unique index)
run load_insert_new_unkeyed "$W" "$NEW" "SELECT cpht_insert_new(:p, 'ingest_staging', 'ingest_events_unkeyed')" \
	"$SETUP_PRIVATE"
run load_floor_unkeyed 0 "" "INSERT INTO ingest_events_unkeyed SELECT * FROM ingest_new_rows_arrival"

ratio() {
	if [ -n "${MEDIAN[$1]:-}" ] && [ -n "${MEDIAN[$2]:-}" ]; then
		echo "== $1 / $2: $(awk -v a="${MEDIAN[$1]}" -v b="${MEDIAN[$2]}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')"
	fi
}
ratio load_insert_new load_floor_plain
ratio load_insert_new load_floor_arrival
ratio load_fop_rows load_floor
ratio on_conflict load_insert_new
ratio load_insert_new_unkeyed load_floor_unkeyed
ratio on_conflict load_insert_new_unkeyed

echo "== written to $CPHT_BENCH_OUT"
