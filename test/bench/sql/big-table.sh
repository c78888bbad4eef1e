#!/bin/bash
# A shared table larger than one GPU, end to end from SQL: on a running
# server with cpht in shared_preload_libraries (PGHOST, PGPORT, PGUSER,
# PGDATABASE), it creates a shared iceberg table sharded over every GPU cpht
# uses whose slot memory is about twice the first GPU's total memory, loads
# distinct keys into it, checks them and drops it, printing the elapsed time
# of each step.
#
#   test/bench/sql/big-table.sh [KEYS]          KEYS distinct keys (default 1000000000)
#
#   CPHT_BIG_FACTOR=2       slot memory over the first GPU's total memory
#   CPHT_BIG_SHARDS=N       shards (default: as many as cpht uses GPUs)
#   CPHT_BIG_RESERVE_MB=2048
#                           device memory per GPU the table leaves free (the
#                           CUDA context, transfer buffers, kernels' scratch):
#                           the slot memory is capped to what the GPUs have
#                           free minus this, whatever CPHT_BIG_FACTOR says
#   CPHT_BIG_CHUNK=16777216 keys per cpht_find array of the checks
#   CPHT_BIG_DEVICE=cpu CPHT_BIG_TABLE_BYTES=67108864 test/bench/sql/big-table.sh 1000000
#                           the same on the CPU (there is no GPU memory to
#                           size by): a table of that many bytes of slots
#                           over CPHT_BIG_SHARDS (default 2) shards
#
# The table has key_bits => 64, whose slots are 64 bits at every size, so
# its bytes follow the capacity: the capacity is the target bytes over the
# bytes per unit of capacity of a small table of the same kind.  It is not
# transactional (a transactional shared table also keeps every pending key
# of the load in the worker's host memory until commit).  The keys are
# those of generate_series(1, KEYS) through a bijection of 64-bit words,
# so they spread over all 64 bits; absent keys are the images of
# KEYS + 1 .. KEYS + CPHT_BIG_CHUNK.
#
# Host memory such a table needs besides the server (the slots are all on
# the GPUs), in the cpht worker: pinned split memory for the pieces of a
# call, 9 bytes a key for up to 64M keys (576 MiB); each shard's pinned
# transfer buffers (two 4M-key chunks, 72 MiB; as much again on its GPU);
# the transfer arena (cpht.transfer_windows x cpht.transfer_chunk x 9
# bytes, 151 MB by default, pinned when the worker starts); for a call
# larger than one window, a buffer of 9 bytes a key while it runs.  In the
# loading backend, the stream's buffers (cpht.batch_size x 9 bytes, twice);
# in the checking backend, CPHT_BIG_CHUNK keys and answers (9 bytes a key,
# 144 MiB at the default).  So about 1 GB of pinned host memory for two
# GPUs, and no staging of the slots: nothing of them passes the host.
set -euo pipefail

KEYS=${1:-1000000000}
FACTOR=${CPHT_BIG_FACTOR:-2}
DEVICE=${CPHT_BIG_DEVICE:-gpu}
RESERVE_MB=${CPHT_BIG_RESERVE_MB:-2048}
CHUNK=${CPHT_BIG_CHUNK:-16777216}
NAME=cpht_big_table

if ! [[ "$KEYS" =~ ^[1-9][0-9]*$ ]]; then
	echo "big-table.sh: KEYS must be a positive integer, not '$KEYS'" >&2
	exit 2
fi
case "$DEVICE" in
	gpu | cpu) ;;
	*) echo "big-table.sh: CPHT_BIG_DEVICE must be gpu or cpu, not '$DEVICE'" >&2; exit 2 ;;
esac

q() { PGOPTIONS="${PGOPTIONS:-} -c cpht.device=$DEVICE" psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

q -c "CREATE EXTENSION IF NOT EXISTS cpht" > /dev/null
if [ "$(q -c "SELECT cpht_worker_info()->>'preloaded'")" != true ]; then
	echo "big-table.sh: cpht is not in shared_preload_libraries of this server" >&2
	exit 1
fi

# A small table of one shard: the first GPU's memory, and the slot bytes
# per unit of capacity; one of 16 shards: how many GPUs cpht uses.
probe=$(q -F ' ' <<'SQL'
SELECT cpht_create(1000000, key_bits => 64, shards => 1) AS one \gset
SELECT cpht_create(16000, key_bits => 64, shards => 16) AS many \gset
SELECT coalesce(cpht_info(:one)->>'device_total_bytes', '0'),
	   coalesce(cpht_info(:one)->>'device_free_bytes', '0'),
	   cpht_info(:one)->>'bytes',
	   (SELECT count(DISTINCT x->>'gpu') FROM jsonb_array_elements(cpht_info(:many)->'shards') x),
	   cpht_info(:one)->>'device_name';
SQL
)
read -r total free probe_bytes ngpus device_name <<<"$probe"

if [ "$DEVICE" = gpu ]; then
	if [ "$total" = 0 ]; then
		echo "big-table.sh: the table went to the CPU: no GPU is usable (CPHT_BIG_DEVICE=cpu for a run on the CPU)" >&2
		exit 1
	fi
	SHARDS=${CPHT_BIG_SHARDS:-$ngpus}
	target=$(awk -v t="$total" -v f="$FACTOR" 'BEGIN { printf "%.0f", t * f }')
	# the GPUs' free memory (the first one's, times the GPUs the shards
	# use) less the reserve, so that the create does not fail for room
	used=$((SHARDS < ngpus ? SHARDS : ngpus))
	room=$(awk -v fr="$free" -v p="$probe_bytes" -v g="$used" -v r="$RESERVE_MB" \
		'BEGIN { printf "%.0f", (fr + p - r * 1048576) * g }')
	echo "GPUs: $ngpus ($device_name); first GPU: $total bytes, $free free; $SHARDS shards"
	if [ "$target" -gt "$room" ]; then
		echo "target ${FACTOR}x the first GPU ($target bytes) is more than the GPUs hold free less ${RESERVE_MB} MB each: $room bytes"
		target=$room
	fi
else
	SHARDS=${CPHT_BIG_SHARDS:-2}
	target=${CPHT_BIG_TABLE_BYTES:?CPHT_BIG_TABLE_BYTES (bytes of slots) is needed on the CPU}
	echo "CPU table of $target bytes of slots, $SHARDS shards"
fi
capacity=$(awk -v t="$target" -v p="$probe_bytes" 'BEGIN { printf "%.0f", t / p * 1000000 }')
if [ "$KEYS" -gt "$capacity" ]; then
	echo "big-table.sh: $KEYS keys do not fit a table of $target bytes (capacity $capacity)" >&2
	exit 1
fi

# distinct keys spread over all 64 bits: y = x ^ (x << s) is a bijection of
# 64-bit words, and bigint's << does not check overflow
KEYFN="CREATE FUNCTION pg_temp.big_keys(lo bigint, hi bigint) RETURNS SETOF bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE ROWS 1000000 AS
\$\$ SELECT y # (y << 13) FROM (SELECT g # (g << 21) AS y FROM generate_series(lo, hi) g) s \$\$;"

# Every key of lo .. hi found (want true) or none of them (want false), in
# arrays of CHUNK keys; prints the keys that answered otherwise.
check_find() {
	q <<SQL
$KEYFN
DO \$\$
DECLARE
	h int := cpht_open('$NAME');
	wrong bigint := 0;
	lo bigint := $1;
BEGIN
	WHILE lo <= $2 LOOP
		wrong := wrong + (SELECT count(*) FILTER (WHERE f IS DISTINCT FROM $3)
						  FROM unnest(cpht_find(h, ARRAY(SELECT pg_temp.big_keys(lo, least(lo + $CHUNK - 1, $2))))) f);
		lo := lo + $CHUNK;
	END LOOP;
	PERFORM set_config('cpht_big.wrong', wrong::text, false);
END \$\$;
SELECT current_setting('cpht_big.wrong');
SQL
}

q -c "SELECT cpht_drop(cpht_open('$NAME'))" > /dev/null 2>&1 || true

t=$(now)
q -c "SELECT cpht_create($capacity, key_bits => 64, transactional => false, name => '$NAME', shards => $SHARDS)" > /dev/null
echo "create: capacity $capacity, $(elapsed "$t") s"
q <<SQL
SELECT 'bytes ' || (i->>'bytes')
	|| coalesce(' (' || round((i->>'bytes')::numeric / nullif($total, 0), 3) || ' x the first GPU)', '')
	|| ', staging ' || (i->>'staging_bytes') || ', device ' || (i->>'device')
	|| ', ' || jsonb_array_length(i->'shards') || ' shards'
FROM (SELECT cpht_info(cpht_open('$NAME')) AS i) x;
SELECT '  shard ' || n || ': ' || (x->>'device') || ' ' || coalesce(x->>'gpu', '-') || ', '
	|| (x->>'slots') || ' slots, ' || (x->>'bytes') || ' bytes'
FROM jsonb_array_elements(cpht_info(cpht_open('$NAME'))->'shards') WITH ORDINALITY s(x, n);
SQL

t=$(now)
new=$(q -c "$KEYFN" -c "SELECT cpht_fop_agg(cpht_open('$NAME'), k) FROM pg_temp.big_keys(1, $KEYS) k")
echo "load: $KEYS keys by cpht_fop_agg, $new new, $(elapsed "$t") s"

failed=0
count=$(q -c "SELECT cpht_count(cpht_open('$NAME'))")
echo "count: $count"
[ "$new" = "$KEYS" ] && [ "$count" = "$KEYS" ] || { echo "FAILED: $new new and a count of $count, not $KEYS"; failed=1; }

t=$(now)
wrong=$(check_find 1 "$KEYS" true)
echo "find: every loaded key, in arrays of $CHUNK: $wrong not found, $(elapsed "$t") s"
[ "$wrong" = 0 ] || failed=1

t=$(now)
wrong=$(check_find $((KEYS + 1)) $((KEYS + CHUNK)) false)
echo "find: $CHUNK absent keys: $wrong found, $(elapsed "$t") s"
[ "$wrong" = 0 ] || failed=1

t=$(now)
again=$(q -c "$KEYFN" -c "SELECT cpht_fop_agg(cpht_open('$NAME'), k) FROM pg_temp.big_keys(1, $KEYS) k")
echo "find-or-put of the same keys again: $again new, $(elapsed "$t") s"
[ "$again" = 0 ] || failed=1
q <<SQL
SELECT 'after: count ' || (i->>'count') || ', grows ' || (i->>'grows') || ', shards '
	|| (SELECT string_agg((x->>'count') || ' keys fill ' || round((x->>'fill')::numeric, 4), '; ')
		FROM jsonb_array_elements(i->'shards') x)
FROM (SELECT cpht_info(cpht_open('$NAME')) AS i) x;
SQL

t=$(now)
q -c "SELECT cpht_drop(cpht_open('$NAME'))" > /dev/null
echo "drop: $(elapsed "$t") s"
if [ $failed -ne 0 ]; then
	echo "big-table.sh: FAILED"
	exit 1
fi
echo "big-table.sh: passed"
