#!/usr/bin/env bash
# sessions.sh — many sessions at once: CLIENTS pgbench clients (default 32)
# each create, fill, check and drop their own tables TX times, on the device
# cpht.device selects.  Reports failed transactions, and on a GPU machine
# the device memory in use before, during and after (it must come back).
#
#   test/bench/sql/sessions.sh [CLIENTS] [TX] [DEVICE]
# Needs PGHOST/PGPORT/PGUSER of a running server with cpht installed.
set -euo pipefail
CLIENTS=${1:-32}
TX=${2:-10}
DEVICE=${3:-auto}
cd "$(dirname "$0")"
gpu_mem() { command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=memory.used --format=csv,noheader || echo "n/a"; }

psql -X -q -c "CREATE EXTENSION IF NOT EXISTS cpht"
echo "device memory before: $(gpu_mem)"
# The most device memory seen while pgbench runs (sampled every second).
peak=$(mktemp)
( while sleep 1; do gpu_mem; done > "$peak" ) &
sampler=$!
PGOPTIONS="-c cpht.device=$DEVICE" pgbench -n -c "$CLIENTS" -j "$CLIENTS" -t "$TX" -f sessions.pgbench 2>&1 |
	grep -E 'clients|transactions|failed|latency|tps|ERROR|error' || true
kill $sampler 2>/dev/null || true
echo "device memory during (peak of $(wc -l < "$peak") samples): $(sort -n "$peak" | tail -1)"
rm -f "$peak"
sleep 2
echo "device memory after: $(gpu_mem)"
psql -X -At -c "SELECT 'server still up, backends: ' || count(*) FROM pg_stat_activity"
