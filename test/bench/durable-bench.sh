#!/usr/bin/env bash
# durable-bench.sh — what a durable shared table costs, against a running
# server with cpht in shared_preload_libraries (PGHOST/PGPORT/PGUSER/
# PGDATABASE; a superuser).
#
#   test/bench/durable-bench.sh
#
# On the device cpht.device picks (CPHT_BENCH_DEVICE, default auto):
#   1. WAL bytes per changed key: the WAL of one transaction that inserts
#      CPHT_BENCH_WAL_KEYS new keys into a durable table, minus that of the
#      same transaction on a table that is not durable, per key; the same
#      for deleting them;
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

# ---- 1. WAL per key
drop_tables bench_wal_d bench_wal_n
q -c "SELECT cpht_create($CPHT_BENCH_WAL_KEYS, name => 'bench_wal_d', durable => true)" \
	-c "SELECT cpht_create($CPHT_BENCH_WAL_KEYS, name => 'bench_wal_n')" > /dev/null
wal_of() {
	q <<SQL | tail -1
SELECT pg_current_wal_insert_lsn() AS l0 \gset
BEGIN;
SELECT $2(cpht_open('$1'), ARRAY(SELECT generate_series(1, $CPHT_BENCH_WAL_KEYS)::bigint));
COMMIT;
SELECT pg_current_wal_insert_lsn() - :'l0';
SQL
}
put_d=$(wal_of bench_wal_d cpht_put)
put_n=$(wal_of bench_wal_n cpht_put)
del_d=$(wal_of bench_wal_d cpht_delete)
del_n=$(wal_of bench_wal_n cpht_delete)
echo "| WAL, $CPHT_BENCH_WAL_KEYS keys in one transaction | durable | not durable | per changed key |"
echo "| --- | --- | --- | --- |"
awk -v d="$put_d" -v n="$put_n" -v k="$CPHT_BENCH_WAL_KEYS" 'BEGIN { printf "| put | %d B | %d B | %.2f B |\n", d, n, (d - n) / k }'
awk -v d="$del_d" -v n="$del_n" -v k="$CPHT_BENCH_WAL_KEYS" 'BEGIN { printf "| delete | %d B | %d B | %.2f B |\n", d, n, (d - n) / k }'
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
