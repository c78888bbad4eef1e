#!/usr/bin/env bash
# restore-bench.sh — how fast a durable shared table comes back when the
# server starts, next to how fast the disk reads its snapshot file.
#
#   CPHT_PG_CTL='pg_ctlcluster 15 main' CPHT_PG_LOG=/var/log/postgresql/postgresql-15-main.log \
#       test/bench/sql/restore-bench.sh
#
# Against a running server with cpht in shared_preload_libraries (PGHOST,
# PGPORT, PGUSER: a superuser), which this script stops and starts with
# CPHT_PG_CTL (a command taking stop or start); CPHT_PG_LOG is the server's
# log.  Run as root to have the page cache dropped before each read.
#
#   1. a durable shared table (transactional => false, key_bits 64) of
#      CPHT_BENCH_KEYS distinct keys (default 1e9) on the device
#      CPHT_BENCH_DEVICE picks (default auto), filled by CPHT_BENCH_SESSIONS
#      sessions at once (default: the cores), each putting arrays of
#      CPHT_BENCH_BATCH keys (default 1e7); snapshot rounds are off while it
#      loads;
#   2. its snapshot (cpht_checkpoint): seconds and the file's bytes;
#   3. a clean shutdown, then the disk's own sequential read rate: dd of the
#      snapshot file with iflag=direct (the page cache dropped first if
#      /proc/sys/vm/drop_caches can be written);
#   4. the page cache dropped again, the server started: seconds until
#      cpht_open and cpht_count of the table answer, and the cpht worker's
#      own restore time from its LOG line (bytes, seconds, GB/s).
#
# The table and its file are dropped at the end and the settings reset.
set -euo pipefail

: "${CPHT_BENCH_KEYS:=1000000000}"
: "${CPHT_BENCH_DEVICE:=auto}"
: "${CPHT_BENCH_SESSIONS:=$(nproc)}"
: "${CPHT_BENCH_BATCH:=10000000}"
: "${CPHT_PG_CTL:?a command that stops and starts the server (stop|start)}"
: "${CPHT_PG_LOG:?the server log file}"
export PGOPTIONS="${PGOPTIONS:-} -c cpht.device=$CPHT_BENCH_DEVICE"
read -r -a ctl <<<"$CPHT_PG_CTL"
table=bench_restore

q() {
	psql -X -q -At -v ON_ERROR_STOP=1 "$@"
}

now() {
	date +%s.%N
}

# drop_caches: whether the page cache could be dropped
drop_caches() {
	sync
	if [ -w /proc/sys/vm/drop_caches ] && echo 3 > /proc/sys/vm/drop_caches 2> /dev/null; then
		echo dropped
	else
		echo "not dropped"
	fi
}

q -c "CREATE EXTENSION IF NOT EXISTS cpht" > /dev/null
q -c "SHOW shared_preload_libraries" | grep -qw cpht || { echo "cpht is not preloaded" >&2; exit 2; }
datadir=$(q -c "SHOW data_directory")
q -c "SELECT cpht_drop(cpht_open('$table'))" > /dev/null 2>&1 || true
q -c "ALTER SYSTEM SET cpht.snapshot_wal = 0" -c "ALTER SYSTEM SET cpht.snapshot_interval = 0" \
	-c "SELECT pg_reload_conf()" > /dev/null
trap 'q -c "ALTER SYSTEM RESET cpht.snapshot_wal" -c "ALTER SYSTEM RESET cpht.snapshot_interval" -c "SELECT pg_reload_conf()" > /dev/null 2>&1 || true' EXIT

# ---- 1. load
q -c "SELECT cpht_create($CPHT_BENCH_KEYS, key_bits => 64, transactional => false, name => '$table', durable => true)" > /dev/null
device=$(q -c "SELECT cpht_info(cpht_open('$table'))->>'device_name'")
echo "# restore of a durable shared table ($(date -u +%F), device: ${device:-cpu}, $(nproc) cores)"
echo
batches=$(((CPHT_BENCH_KEYS + CPHT_BENCH_BATCH - 1) / CPHT_BENCH_BATCH))
t0=$(now)
pids=()
for s in $(seq 0 $((CPHT_BENCH_SESSIONS - 1))); do
	q > /dev/null <<SQL &
DO \$\$
DECLARE
	h int := cpht_open('$table');
BEGIN
	FOR b IN 0 .. $batches - 1 LOOP
		CONTINUE WHEN b % $CPHT_BENCH_SESSIONS <> $s;
		PERFORM cpht_put(h, ARRAY(SELECT generate_series(b::bigint * $CPHT_BENCH_BATCH,
			least((b + 1)::bigint * $CPHT_BENCH_BATCH, $CPHT_BENCH_KEYS) - 1)));
	END LOOP;
END \$\$;
SQL
	pids+=($!)
done
for p in "${pids[@]}"; do
	wait "$p"
done
t1=$(now)
count=$(q -c "SELECT cpht_count(cpht_open('$table'))")
[ "$count" = "$CPHT_BENCH_KEYS" ] || { echo "the table counts $count keys, not $CPHT_BENCH_KEYS" >&2; exit 1; }
echo "| step | result |"
echo "| --- | --- |"
awk -v a="$t0" -v b="$t1" -v n="$count" -v s="$CPHT_BENCH_SESSIONS" \
	'BEGIN { printf "| load: %d keys by %d sessions (cpht_put, WAL-logged) | %.1f s |\n", n, s, b - a }'

# ---- 2. snapshot
t0=$(now)
q -c "SELECT cpht_checkpoint()" > /dev/null
t1=$(now)
file=$(grep -l -a -- "$table" "$datadir"/pg_cpht/*.snap | head -1)
bytes=$(stat -c %s "$file")
awk -v a="$t0" -v b="$t1" -v n="$bytes" \
	'BEGIN { printf "| snapshot (cpht_checkpoint): file of %d bytes (%.2f GB) | %.2f s, %.2f GB/s |\n", n, n / 1e9, b - a, n / 1e9 / (b - a) }'

# ---- 3. the disk's read rate
"${ctl[@]}" stop > /dev/null
cache=$(drop_caches)
dd_out=$(dd if="$file" of=/dev/null bs=64M iflag=direct 2>&1 | tail -1)
dd_secs=$(awk -F', ' '{ split($3, a, " "); print a[1] }' <<<"$dd_out")
awk -v n="$bytes" -v s="$dd_secs" -v c="$cache" \
	'BEGIN { printf "| disk: dd of the snapshot, bs=64M iflag=direct (page cache %s) | %.2f s, %.2f GB/s |\n", c, s, n / 1e9 / s }'

# ---- 4. restore at start
cache=$(drop_caches)
log_lines=$(wc -l < "$CPHT_PG_LOG")
t0=$(now)
"${ctl[@]}" start > /dev/null
for _ in $(seq 1 30000); do
	q -c "SELECT cpht_count(cpht_open('$table'))" > /dev/null 2>&1 && break
	sleep 0.02
done
t1=$(now)
count=$(q -c "SELECT cpht_count(cpht_open('$table'))" 2>&1 || true)
if [ "$count" != "$CPHT_BENCH_KEYS" ]; then
	echo "after the restart the table does not count $CPHT_BENCH_KEYS keys: $count" >&2
	exit 1
fi
awk -v a="$t0" -v b="$t1" -v n="$bytes" -v c="$cache" \
	'BEGIN { printf "| server start until cpht_open + cpht_count answer (page cache %s) | %.2f s, %.2f GB/s of the file |\n", c, b - a, n / 1e9 / (b - a) }'
worker=$(tail -n +$((log_lines + 1)) "$CPHT_PG_LOG" | grep -a "cpht worker read durable shared table \"$table\"" | tail -1 |
	sed 's/.*memory: //')
echo "| the cpht worker's restore (its LOG line: open, read, checksum, copy) | ${worker:-no LOG line found} |"

q -c "SELECT cpht_drop(cpht_open('$table'))" > /dev/null
