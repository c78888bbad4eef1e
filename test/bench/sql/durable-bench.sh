#!/usr/bin/env bash
# durable-bench.sh — what a durable shared table costs, against a running
# server with cpht in shared_preload_libraries (PGHOST/PGPORT/PGUSER/
# PGDATABASE; a superuser).
#
#   test/bench/sql/durable-bench.sh
#
# On the device cpht.device picks (CPHT_BENCH_DEVICE, default auto):
#   1. WAL bytes per changed key: the WAL of one transaction that inserts
#      CPHT_BENCH_WAL_KEYS new keys into a durable table, minus that of the
#      same transaction on a table that is not durable, per key; the same
#      for deleting them.  Each is measured once the server is quiet (no
#      other statement running, up to CPHT_BENCH_QUIET seconds of waiting),
#      and the cpht records alone are counted too (pg_walinspect's
#      pg_get_wal_stats over the transaction's WAL), which no other session's
#      WAL can disturb;
#   2. ingest time: CPHT_BENCH_BATCHES transactions of CPHT_BENCH_BATCH new
#      keys each (cpht_put, then COMMIT, synchronous_commit on) into a
#      transactional shared table, durable and not, each run
#      CPHT_BENCH_REPS times alternately; medians and their ratio;
#   3. a snapshot (cpht_checkpoint) and a clean restart's restore of the
#      loaded durable table: seconds, and its bytes (the restart part only
#      with CPHT_BENCH_RESTART=cluster-name, e.g. 15/main, run as root).
set -euo pipefail

: "${CPHT_BENCH_DEVICE:=auto}"
: "${CPHT_BENCH_WAL_KEYS:=1000000}"
: "${CPHT_BENCH_BATCHES:=20}"
: "${CPHT_BENCH_BATCH:=1000000}"
: "${CPHT_BENCH_REPS:=3}"
: "${CPHT_BENCH_RESTART:=}"
: "${CPHT_BENCH_QUIET:=120}"
export PGOPTIONS="${PGOPTIONS:-} -c cpht.device=$CPHT_BENCH_DEVICE -c synchronous_commit=on"

q() {
	psql -X -q -At -v ON_ERROR_STOP=1 "$@"
}

q -c "CREATE EXTENSION IF NOT EXISTS cpht" > /dev/null
q -c "SHOW shared_preload_libraries" | grep -qw cpht || { echo "cpht is not preloaded" >&2; exit 2; }
device=$(q -c "SELECT cpht_create(10, name => 'bench_probe')" -c "SELECT cpht_info(cpht_open('bench_probe'))->>'device_name'" -c "SELECT cpht_drop(cpht_open('bench_probe'))" | sed -n 2p)
echo "# durable shared tables: costs ($(date -u +%F), device: ${device:-cpu})"
echo

q > /dev/null <<'SQL'
CREATE OR REPLACE PROCEDURE cpht_bench_ingest(name text, batches int, batch int, INOUT secs float8)
LANGUAGE plpgsql AS $$
DECLARE
	h int := cpht_open(name);
	t0 timestamptz;
	keys bigint[];
BEGIN
	secs := 0;
	FOR b IN 0 .. batches - 1 LOOP
		keys := ARRAY(SELECT generate_series(b::bigint * batch, (b + 1)::bigint * batch - 1));
		t0 := clock_timestamp();
		PERFORM cpht_put(h, keys);
		COMMIT;
		secs := secs + extract(epoch FROM clock_timestamp() - t0);
	END LOOP;
END $$;
SQL

drop_tables() {
	for t in "$@"; do
		q -c "SELECT cpht_drop(cpht_open('$t'))" > /dev/null 2>&1 || true
	done
}

# durable tables left behind would come back at every start: none stays
trap 'drop_tables bench_wal_d bench_wal_n bench_ingest' EXIT

# ---- 1. WAL per key
drop_tables bench_wal_d bench_wal_n
q -c "SELECT cpht_create($CPHT_BENCH_WAL_KEYS, name => 'bench_wal_d', durable => true)" \
	-c "SELECT cpht_create($CPHT_BENCH_WAL_KEYS, name => 'bench_wal_n')" > /dev/null
# pg_walinspect (contrib) counts the cpht records alone; without it only
# the whole WAL difference is reported
walinspect=yes
q -c "CREATE EXTENSION IF NOT EXISTS pg_walinspect" > /dev/null 2>&1 || walinspect=no
# Waits until no other statement runs on the server (another session's WAL
# would land in the window); prints how many still ran when it gave up.
wait_quiet() {
	local busy
	for _ in $(seq 1 $((CPHT_BENCH_QUIET * 10))); do
		busy=$(q -c "SELECT count(*) FROM pg_stat_activity WHERE state NOT IN ('idle') AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
		[ "$busy" = 0 ] && break
		sleep 0.1
	done
	echo "$busy"
}
# The WAL of one transaction calling $2 on table $1: all of it, and of that
# the cpht records (the worker's records of the changed keys).
wal_of() {
	local lsns
	lsns=$(q <<SQL | tail -1
SELECT pg_current_wal_insert_lsn() AS l0 \gset
BEGIN;
SELECT $2(cpht_open('$1'), ARRAY(SELECT generate_series(1, $CPHT_BENCH_WAL_KEYS)::bigint));
COMMIT;
SELECT :'l0' || ' ' || pg_current_wal_insert_lsn();
SQL
)
	read -r l0 l1 <<<"$lsns"
	# pg_walinspect reads flushed WAL only: a commit with an xid flushes it
	q -c "BEGIN" -c "SELECT txid_current()" -c "COMMIT" > /dev/null
	if [ $walinspect = no ]; then
		q -c "SELECT pg_wal_lsn_diff('$l1', '$l0') || ' -1'"
		return
	fi
	q -c "SELECT pg_wal_lsn_diff('$l1', '$l0') || ' ' || CASE WHEN '$l1'::pg_lsn > '$l0'::pg_lsn
		THEN (SELECT coalesce(sum(combined_size), 0) FROM pg_get_wal_stats('$l0', '$l1')
			WHERE \"resource_manager/record_type\" = 'cpht') ELSE 0 END"
}
busy=$(wait_quiet)
read -r put_d put_dc <<<"$(wal_of bench_wal_d cpht_put)"
read -r put_n put_nc <<<"$(wal_of bench_wal_n cpht_put)"
read -r del_d del_dc <<<"$(wal_of bench_wal_d cpht_delete)"
read -r del_n del_nc <<<"$(wal_of bench_wal_n cpht_delete)"
if [ $walinspect = no ]; then
	echo "(pg_walinspect is not installed: the cpht records' columns show -1)"
	echo
fi
if [ "$busy" != 0 ]; then
	echo "($busy other statements still ran after ${CPHT_BENCH_QUIET} s of waiting: the WAL columns may hold theirs; the cpht records' column does not)"
	echo
fi
echo "| WAL, $CPHT_BENCH_WAL_KEYS keys in one transaction | durable | not durable | per changed key | cpht records, durable | cpht records per changed key |"
echo "| --- | --- | --- | --- | --- | --- |"
awk -v d="$put_d" -v n="$put_n" -v c="$put_dc" -v k="$CPHT_BENCH_WAL_KEYS" \
	'BEGIN { printf "| put | %d B | %d B | %.2f B | %d B | %.2f B |\n", d, n, (d - n) / k, c, c / k }'
awk -v d="$del_d" -v n="$del_n" -v c="$del_dc" -v k="$CPHT_BENCH_WAL_KEYS" \
	'BEGIN { printf "| delete | %d B | %d B | %.2f B | %d B | %.2f B |\n", d, n, (d - n) / k, c, c / k }'
[ "$put_nc" -le 0 ] && [ "$del_nc" -le 0 ] || echo "(the table that is not durable wrote cpht records: $put_nc B, $del_nc B)"
drop_tables bench_wal_d bench_wal_n
echo

# ---- 2. ingest time
times_d=()
times_n=()
for rep in $(seq 1 "$CPHT_BENCH_REPS"); do
	for kind in d n; do
		drop_tables bench_ingest
		if [ $kind = d ]; then
			q -c "SELECT cpht_create(1000000, name => 'bench_ingest', durable => true)" > /dev/null
		else
			q -c "SELECT cpht_create(1000000, name => 'bench_ingest')" > /dev/null
		fi
		s=$(q -c "CALL cpht_bench_ingest('bench_ingest', $CPHT_BENCH_BATCHES, $CPHT_BENCH_BATCH, NULL)")
		if [ $kind = d ]; then times_d+=("$s"); else times_n+=("$s"); fi
	done
done
median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
md=$(median "${times_d[@]}")
mn=$(median "${times_n[@]}")
echo "| ingest: $CPHT_BENCH_BATCHES transactions x $CPHT_BENCH_BATCH new keys (cpht_put; COMMIT) | seconds (median of $CPHT_BENCH_REPS) | runs |"
echo "| --- | --- | --- |"
echo "| durable | $md | ${times_d[*]} |"
echo "| not durable | $mn | ${times_n[*]} |"
awk -v d="$md" -v n="$mn" 'BEGIN { printf "| ratio | %.2fx | |\n", d / n }'
echo

# ---- 3. snapshot and restore of the loaded table
drop_tables bench_ingest
q -c "SELECT cpht_create(1000000, name => 'bench_ingest', durable => true)" > /dev/null
q -c "CALL cpht_bench_ingest('bench_ingest', $CPHT_BENCH_BATCHES, $CPHT_BENCH_BATCH, NULL)" > /dev/null
snap=$(q <<'SQL' | tail -1
SELECT clock_timestamp() AS t0 \gset
SELECT cpht_checkpoint();
SELECT round(extract(epoch FROM clock_timestamp() - :'t0')::numeric, 3) || ' s, ' ||
	(cpht_info(cpht_open('bench_ingest'))->>'bytes') || ' bytes of slots';
SQL
)
echo "| snapshot of $((CPHT_BENCH_BATCHES * CPHT_BENCH_BATCH)) keys (cpht_checkpoint) | $snap |"
echo "| --- | --- |"
if [ -n "$CPHT_BENCH_RESTART" ]; then
	t0=$(date +%s.%N)
	pg_ctlcluster ${CPHT_BENCH_RESTART%/*} ${CPHT_BENCH_RESTART#*/} restart
	until q -c "SELECT cpht_open('bench_ingest')" > /dev/null 2>&1; do sleep 0.05; done
	t1=$(date +%s.%N)
	echo "| clean restart until the table is open again | $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f s", b - a }') |"
fi
drop_tables bench_ingest
q -c "DROP PROCEDURE cpht_bench_ingest" > /dev/null
