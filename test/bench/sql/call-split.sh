#!/usr/bin/env bash
# call-split.sh — one large cpht_fop in a plain backend next to the same
# call on a shared and on a private table in the cpht worker, with
# cpht.trace's split of where each one's time went.
#
#   test/bench/sql/call-split.sh        (as root, from anywhere)
#
# Starts a throwaway PostgreSQL 15 server (pg_virtualenv) and runs
# shared-bench.sh part c on it twice: first plain (each backend holds its
# own tables), then restarted with cpht in shared_preload_libraries (tables
# in the cpht worker, private CPU tables too: cpht.placement = worker).
# Prints a markdown table: the call's median time in each place, its ratio
# to the plain backend's, and the medians of cpht.trace's split (the
# session's copies and waits and the worker's table calls for a call
# streamed through the worker; staging, device and result copies inside
# the table call).  Every answer is checked by shared-bench.sh.
: "${CPHT_SPLIT_KEYS:=50000000}"   # keys of the call
: "${CPHT_SPLIT_REPS:=5}"          # repetitions in each place (fresh tables each)
: "${CPHT_SPLIT_DEVICE:=gpu}"      # gpu, cpu or auto (shared-bench.sh falls back to cpu)
: "${CPHT_SPLIT_OUT:=}"            # also write the table here (none if empty)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)

if [ "${1:-}" != --inside ]; then
	exec pg_virtualenv -t -v 15 "$ROOT/test/bench/sql/call-split.sh" --inside
fi

# ---- inside the throwaway server ----------------------------------------------
cd "$ROOT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# pg_virtualenv's environment points at its cluster; the bench's tables and
# the extension go into the postgres database.
export PGDATABASE=postgres
bench() { # mode -> its calls in $TMP/<mode>.calls, its table in $TMP/<mode>.md
	CPHT_BENCH_PARTS=c CPHT_BENCH_BIG_KEYS=$CPHT_SPLIT_KEYS CPHT_BENCH_BIG_REPS=$CPHT_SPLIT_REPS \
		CPHT_BENCH_DEVICE=$CPHT_SPLIT_DEVICE CPHT_BENCH_OUT="$TMP/$1.md" \
		CPHT_BENCH_CALLS_OUT="$TMP/$1.calls" test/bench/sql/shared-bench.sh > /dev/null
}

echo "call-split: plain server, $CPHT_SPLIT_REPS calls of $CPHT_SPLIT_KEYS keys" >&2
bench plain
echo "call-split: restarting with cpht preloaded" >&2
psql -X -q -v ON_ERROR_STOP=1 -c "ALTER SYSTEM SET shared_preload_libraries = 'cpht'"
pg_ctlcluster 15 regress restart
PGOPTIONS="${PGOPTIONS:-} -c cpht.placement=worker" bench preloaded

# Median of column c of the lines of file f whose first field is t, or -.
med() { # file table column
	awk -v t="$2" -v c="$3" '$1 == t && $c != "-" { print $c }' "$1" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else printf "%.1f", v[int((NR + 1) / 2)] }'
}
# Lines: table, call ms, table ms, right, stage, device wait, copy out, undo,
# keys in, statuses out, session wait, worker pieces, worker wait.
plain=$(med "$TMP/plain.calls" p 2)
line() { # label file table
	local f=$2 t=$3 call ratio
	call=$(med "$f" "$t" 2)
	ratio=$(awk -v a="$call" -v b="$plain" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2fx", a / b }')
	printf '| %s | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s / %s |\n' "$1" "$call" "$ratio" "$(med "$f" "$t" 3)" \
		"$(med "$f" "$t" 12)" \
		"$(med "$f" "$t" 9)" "$(med "$f" "$t" 10)" "$(med "$f" "$t" 11)" \
		"$(med "$f" "$t" 5)" "$(med "$f" "$t" 6)" "$(med "$f" "$t" 7)" "$(med "$f" "$t" 8)"
}
{
	echo "# one $CPHT_SPLIT_KEYS-key cpht_fop: plain backend and cpht worker"
	echo
	echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), host $(hostname), $(nproc) CPU cores; GPU: $(command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1 || echo none)"
	sed -n 's/^- server: /- plain server: /p' "$TMP/plain.md"
	sed -n 's/^- server: /- preloaded server: /p' "$TMP/preloaded.md"
	grep -h '^- \(cpht.device\|private\|shared\)' "$TMP/preloaded.md"
	echo "- ms, medians of $CPHT_SPLIT_REPS calls, each into a fresh table (all keys new, every answer checked); - where cpht.trace reports no such part"
	echo
	echo "| where the table is | call | vs plain | table call (cpht.trace) | worker: pieces' table calls | session: keys in / statuses out / waiting | table call: staging keys / waiting for the device / copying results / undo log |"
	echo "| --- | --- | --- | --- | --- | --- | --- |"
	line "plain backend, private table" "$TMP/plain.calls" p
	line "cpht worker, shared table" "$TMP/preloaded.calls" s
	line "cpht worker, private table" "$TMP/preloaded.calls" p
} | tee ${CPHT_SPLIT_OUT:+"$CPHT_SPLIT_OUT"}
