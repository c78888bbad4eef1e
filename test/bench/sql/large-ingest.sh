#!/usr/bin/env bash
# large-ingest.sh — new ids of a very large staging relation against a
# large set of seen ids, next to parallel count(id) of the same relation.
#
#   CPHT_LARGE_ROWS=1000000000 test/bench/sql/large-ingest.sh
#
# Runs against a running server with cpht preloaded (PGHOST, PGPORT, PGUSER,
# PGDATABASE), a superuser.  Builds an unlogged relation large_staging(id)
# of ROWS distinct-looking ids (hashint8extended of 1..ROWS) with SESSIONS
# concurrent INSERTs, and a non-transactional shared table large_seen
# holding the ids of 1..ROWS/2, loaded by SESSIONS concurrent sessions.
# Then it times count(id) (3 times) and one cpht_fop_relation over the
# relation with WORKERS parallel workers, and checks the answer:
# hashint8extended folds an int8 to 32 bits before hashing, so a large
# relation holds a few repeated ids; the new ids must then be exactly what
# brings the table's count to the distinct ids of the relation, which a
# second pass confirms by finding none new.  Drops what it made unless
# CPHT_LARGE_KEEP=1.  Needs about 36 bytes of disk per row.
#
# CPHT_LARGE_SHARDS="1 2" runs the seen table's part once for each number
# of shards, over the same staging relation (one table at a time: each is
# dropped before the next is built), so one run compares one GPU with
# several; the last one is kept with CPHT_LARGE_KEEP=1.
#
# CPHT_LARGE_KEY_BITS=64 makes the seen table of fixed 64-bit keys: a table
# of automatic key width (the default, NULL) takes the host path on several
# GPUs, since its widening reads the keys on the host (docs/sharding.md),
# and one of fixed width is routed on the GPUs.
#
# CPHT_LARGE_TRACE=1 runs the timed passes with cpht.trace on and prints
# each pass's NOTICE: where the leader's table calls spent their time (for
# a table routed on its GPUs: keys onto the GPUs, routing, the shards'
# calls, answers back, answers off) and its hand-over of the batches.
: "${CPHT_LARGE_ROWS:=100000000}"
: "${CPHT_LARGE_SHARDS:=1}"
: "${CPHT_LARGE_SESSIONS:=16}"
: "${CPHT_LARGE_WORKERS:=8}"
: "${CPHT_LARGE_KEEP:=0}"
: "${CPHT_LARGE_TRACE:=0}"
: "${CPHT_LARGE_KEY_BITS:=NULL}"
set -euo pipefail

N=$CPHT_LARGE_ROWS
P=$CPHT_LARGE_SESSIONS
SEEN=$((N / 2))
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
q() { psql -X -q -v ON_ERROR_STOP=1 -At -c "$1"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
cleanup() {
	if [ "$CPHT_LARGE_KEEP" != 1 ]; then
		q "SELECT cpht_drop(cpht_open('large_seen'))" >/dev/null 2>&1 || true
		q "DROP TABLE IF EXISTS large_staging" >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

q "CREATE EXTENSION IF NOT EXISTS cpht"
if [ "$(q "SELECT cpht_worker_info()->>'preloaded'")" != true ]; then
	echo "large-ingest: needs cpht in shared_preload_libraries (a shared table)" >&2
	exit 2
fi
echo "== $N staging rows, $SEEN seen ids, $P loading sessions, $CPHT_LARGE_WORKERS workers; $(nproc) cores$(command -v nvidia-smi >/dev/null 2>&1 && echo ", $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)")"
q "SELECT cpht_drop(cpht_open('large_seen'))" >/dev/null 2>&1 || true
q "DROP TABLE IF EXISTS large_staging"
q "CREATE UNLOGGED TABLE large_staging (id bigint)"
t0=$(now)
for i in $(seq 0 $((P - 1))); do
	q "INSERT INTO large_staging SELECT hashint8extended(k, 7)
	   FROM generate_series($((i * N / P + 1)), $(((i + 1) * N / P))) k" &
done
wait
echo "staging filled in $(since "$t0") s: $(q "SELECT pg_size_pretty(pg_relation_size('large_staging'))")"

for SHARDS in $CPHT_LARGE_SHARDS; do
q "SELECT cpht_drop(cpht_open('large_seen'))" >/dev/null 2>&1 || true
q "SELECT cpht_create($((N * 3 / 2)), name => 'large_seen', transactional => false, shards => $SHARDS, key_bits => $CPHT_LARGE_KEY_BITS)" >/dev/null
t0=$(now)
for i in $(seq 0 $((P - 1))); do
	q "SELECT cpht_fop_agg(cpht_open('large_seen'), hashint8extended(k, 7))
	   FROM generate_series($((i * SEEN / P + 1)), $(((i + 1) * SEEN / P))) k" >/dev/null &
done
wait
SEEN_KEYS=$(q "SELECT cpht_count(cpht_open('large_seen'))")
echo "== $SHARDS shard(s): seen ids loaded in $(since "$t0") s: $SEEN_KEYS keys ($(q "SELECT cpht_info(cpht_open('large_seen'))->>'device'"), shards on GPUs $(q "SELECT jsonb_path_query_array(cpht_info(cpht_open('large_seen')), '\$.shards[*].gpu')"))"

# count(id) three times next to each table's first pass (half its ids new)
# and its second (every id found)
trace_set=
[ "$CPHT_LARGE_TRACE" = 1 ] && trace_set="SET cpht.trace = on; SET client_min_messages = notice;"
trace_log=$(mktemp)
out=$(psql -X -q -v ON_ERROR_STOP=1 -At 2> "$trace_log" <<SQL
SET max_parallel_workers_per_gather = $CPHT_LARGE_WORKERS;
$trace_set
SELECT count(id) FROM large_staging;
\\timing on
SELECT count(id) FROM large_staging;
SELECT count(id) FROM large_staging;
SELECT count(id) FROM large_staging;
SELECT cpht_fop_relation(cpht_open('large_seen'), 'large_staging');
\\timing off
SELECT cpht_count(cpht_open('large_seen'));
\\timing on
SELECT cpht_fop_relation(cpht_open('large_seen'), 'large_staging');
SQL
)
mapfile -t times < <(grep '^Time: ' <<<"$out" | awk '{ print $2 / 1000 }')
mapfile -t vals < <(grep -v '^Time: ' <<<"$out")
median=$(printf '%s\n' "${times[@]:0:3}" | sort -g | sed -n 2p)
NEW=${vals[4]}
AFTER=${vals[5]}
AGAIN=${vals[6]}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "count(id): ${times[*]:0:3} s (median $median)"
echo "cpht_fop_relation, $SHARDS shard(s): ${times[3]} s, $NEW new ids ($(ratio "${times[3]}" "$median") x count(id)); all found: ${times[4]} s ($(ratio "${times[4]}" "$median") x count(id))"
echo "table after: $AFTER keys = $SEEN_KEYS seen + $NEW new; a second pass finds $AGAIN new"
if [ "$CPHT_LARGE_TRACE" = 1 ]; then
	echo "cpht.trace of the two passes (half new, then all found):"
	grep -E "NOTICE|DETAIL" "$trace_log" | cut -c1-900
fi
rm -f "$trace_log"
if [ "$AFTER" -ne $((SEEN_KEYS + NEW)) ] || [ "$AGAIN" -ne 0 ]; then
	echo "large-ingest: the answers do not add up" >&2
	exit 1
fi
done
