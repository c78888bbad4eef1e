#!/bin/bash
# GPU checks of the cpht worker on a running server with cpht preloaded and
# a usable GPU (PGHOST/PGPORT/PGUSER reach it, the caller may read
# /proc/<pid>/maps of the server's processes, nvidia-smi is on PATH):
#   - N sessions (default 10) each create a GPU table and hold it: only the
#     cpht worker holds a CUDA context (nvidia-smi), no backend has libcuda
#     mapped, and once the sessions end the worker holds none of their
#     tables;
#   - the time of find-or-put calls of 1M keys on a GPU table in the worker,
#     with cpht.trace splitting it (staging keys and copying results are
#     near zero when the transfer arena is pinned).
#
#   test/bench/sql/worker-gpu.sh [SESSIONS]
set -euo pipefail
N=${1:-10}
DB=${PGDATABASE:-postgres}

psql -X -q -d "$DB" -c "CREATE EXTENSION IF NOT EXISTS cpht"
echo "== cpht_worker_info"
psql -X -At -d "$DB" -c "SELECT jsonb_pretty(cpht_worker_info())"

echo "== $N sessions, a GPU table each"
pids=()
for _ in $(seq 1 "$N"); do
	psql -X -q -d "$DB" -c "SET cpht.device = gpu" \
		-c "SELECT cpht_put(cpht_create(1000000), '{1,2,3}')" -c "SELECT pg_sleep(8)" > /dev/null &
	pids+=($!)
done
sleep 4
psql -X -At -d "$DB" -c "SELECT 'private tables in the worker: ' || (cpht_worker_info()->>'private_tables')"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
worker=$(psql -X -At -d "$DB" -c "SELECT cpht_worker_info()->>'worker_pid'")
echo "worker $worker: libcuda mapped $(grep -c libcuda "/proc/$worker/maps" || true) times"
bad=0
for p in $(psql -X -At -d "$DB" -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"); do
	if grep -q libcuda "/proc/$p/maps" 2>/dev/null; then
		echo "backend $p has libcuda mapped"
		bad=1
	fi
done
[ $bad -eq 0 ] && echo "no backend has libcuda mapped"
wait "${pids[@]}"
sleep 1
psql -X -At -d "$DB" -c "SELECT 'after the sessions ended: private tables in the worker: ' || (cpht_worker_info()->>'private_tables')"

echo "== find-or-put of 1M keys on a GPU table in the worker (cpht.trace)"
psql -X -d "$DB" <<'SQL'
SET cpht.device = gpu;
SELECT cpht_create(8000000) AS h \gset
CREATE TEMP TABLE k AS SELECT i, (SELECT array_agg(g + i * 1000000) FROM generate_series(1, 1000000) g) AS keys FROM generate_series(0, 3) i;
SELECT cpht_info(:h)->>'placement' AS placement, cpht_info(:h)->>'device_name' AS device;
\timing on
SET cpht.trace = on;
SELECT cardinality(cpht_fop(:h, keys)) FROM k WHERE i = 0;
SELECT cardinality(cpht_fop(:h, keys)) FROM k WHERE i = 1;
SELECT cardinality(cpht_fop(:h, keys)) FROM k WHERE i = 1;
SELECT cardinality(cpht_fop(:h, keys)) FROM k WHERE i = 2;
SELECT cardinality(cpht_find(:h, keys)) FROM k WHERE i = 3;
SQL
exit $bad
