#!/usr/bin/env bash
# shared-bench.sh — the numbers that matter for shared tables (tables held by
# the cpht worker) next to private ones, against a running server
# (PGHOST/PGPORT/PGUSER/PGDATABASE; a superuser, or a role that may create
# the extension once it exists).
#
#   test/bench/sql/shared-bench.sh
#
# The server's mode decides what runs: with cpht in shared_preload_libraries
# (preloaded) every part below; without it (plain: each backend loads cpht,
# initialises its own device and holds its own tables) only the private-table
# measurements of parts a, b and c, the shared-table ones printed as
# "n/a (plain server)", so that the two runs can be set side by side.
#
# Measures, and prints as a markdown table (also written to
# CPHT_BENCH_OUT, default test/bench/results/shared-<date>-<mode>.md, where
# mode is plain or preloaded):
#   a. CPHT_BENCH_CONNS connections each holding a private table: GPU memory
#      while all are connected (nvidia-smi, where it exists); and the first
#      cpht_create + first cpht_fop of CPHT_BENCH_FIRST new connections,
#      timed inside each session with clock_timestamp() (median, max)
#   b. a CPHT_BENCH_RT_KEYS-key cpht_fop on an existing table,
#      CPHT_BENCH_RT_CALLS times: the client round trip through pgbench
#      (shared table), and the call alone timed inside a PL/pgSQL loop
#      (shared and private); median and p99
#   c. one CPHT_BENCH_BIG_KEYS-key cpht_fop on a fresh shared and a fresh
#      private table, median of CPHT_BENCH_BIG_REPS: cpht.trace's table time
#      where it reports one, and the call's time inside the session; and
#      where that time went (cpht.trace's split of the table call, and of a
#      call streamed through the cpht worker); CPHT_BENCH_CALLS_OUT, if set,
#      gets one line per call: table (s, p), call ms, table ms, answer
#      right (t), staging keys, waiting for the device, copying results,
#      undo log, session keys in, statuses out, session waiting, worker
#      pieces, worker waiting (ms, - where not reported)
#   d. CPHT_BENCH_SESSIONS sessions find-or-putting CPHT_BENCH_BATCH-key
#      batches into one shared table for CPHT_BENCH_SECONDS: keys/s, every
#      batch's count of new keys checked, and the table's count at the end
#   e. CPHT_BENCH_LOADERS loaders with rollbacks on a transactional shared
#      table, where the server can create one (else the refusal is printed)
# CPHT_BENCH_PARTS names the parts to run (default abcde); on a plain server
# d and e have nothing to measure and print their n/a rows whenever named.
#
# Tables go on cpht.device=CPHT_BENCH_DEVICE (default gpu).  Where that
# device is refused (no usable GPU, or shared tables not placed on the GPU)
# the script says why and uses the CPU.  Every setting:
: "${CPHT_BENCH_DEVICE:=gpu}"          # gpu, cpu or auto
: "${CPHT_BENCH_PARTS:=abcde}"         # the parts to run, any of a b c d e
: "${CPHT_BENCH_CONNS:=100}"           # a: connections holding a private table
: "${CPHT_BENCH_CONN_KEYS:=100000}"    # a: keys each of them puts
: "${CPHT_BENCH_FIRST:=20}"            # a: new connections timed
: "${CPHT_BENCH_RT_CALLS:=1000}"       # b: calls
: "${CPHT_BENCH_RT_KEYS:=1000}"        # b: keys per call
: "${CPHT_BENCH_BIG_KEYS:=50000000}"   # c: keys of the one large call
: "${CPHT_BENCH_BIG_REPS:=3}"          # c: repetitions (fresh tables each)
: "${CPHT_BENCH_SESSIONS:=32}"         # d: concurrent sessions
: "${CPHT_BENCH_BATCH:=1000000}"       # d, e: keys per batch
: "${CPHT_BENCH_SECONDS:=10}"          # d, e: seconds each session runs
: "${CPHT_BENCH_CAPACITY:=400000000}"  # d: capacity of the shared table
: "${CPHT_BENCH_LOADERS:=8}"           # e: loaders
: "${CPHT_BENCH_OUT:=}"                # default: set once the mode is known
: "${CPHT_BENCH_CALLS_OUT:=}"          # c: where to write one line per large call (none if empty)
set -euo pipefail

cd "$(dirname "$0")/../../.."
for v in CPHT_BENCH_CONNS CPHT_BENCH_CONN_KEYS CPHT_BENCH_FIRST CPHT_BENCH_RT_CALLS CPHT_BENCH_RT_KEYS \
	CPHT_BENCH_BIG_KEYS CPHT_BENCH_BIG_REPS CPHT_BENCH_SESSIONS CPHT_BENCH_BATCH CPHT_BENCH_SECONDS \
	CPHT_BENCH_CAPACITY CPHT_BENCH_LOADERS; do
	if ! [[ "${!v}" =~ ^[1-9][0-9]*$ ]]; then
		echo "shared-bench: $v must be a positive integer, not '${!v}'" >&2
		exit 2
	fi
done
case "$CPHT_BENCH_DEVICE" in
	gpu | cpu | auto) ;;
	*) echo "shared-bench: CPHT_BENCH_DEVICE must be gpu, cpu or auto, not '$CPHT_BENCH_DEVICE'" >&2; exit 2 ;;
esac
if ! [[ "$CPHT_BENCH_PARTS" =~ ^[a-e]+$ ]]; then
	echo "shared-bench: CPHT_BENCH_PARTS must name parts among a, b, c, d and e (such as abc), not '$CPHT_BENCH_PARTS'" >&2
	exit 2
fi
if [ "$CPHT_BENCH_BATCH" -lt 2 ]; then
	echo "shared-bench: CPHT_BENCH_BATCH must be at least 2 (batches overlap by half)" >&2
	exit 2
fi

# Timings come back as NOTICEs, whatever the caller's PGOPTIONS say.
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=notice"

q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
# q with the first statement's error message, not psql's prefix, on failure
try() { psql -X -q -At -v ON_ERROR_STOP=1 "$@" 2>&1; }
# Markdown to stdout and to the results file.
out() { printf '%s\n' "$*" | tee -a "$CPHT_BENCH_OUT"; }
note() { out "- $*"; }
# Nearest-rank percentile P (0..100) of the numbers in file $2.
pct() { sort -g "$2" | awk -v p="$1" '{ v[NR] = $1 } END { if (NR == 0) { print "n/a"; exit } i = int((p * NR + 99) / 100); if (i < 1) i = 1; printf "%.3f", v[i] }'; }
has_smi() { command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; }
gpu_used_mib() { has_smi && nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1 || echo "n/a"; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) * 1000 }'; }

# Drop the shared tables a run left (names cpht_bench_*), one statement each,
# so that each takes effect at once.
drop_bench_tables() {
	local name
	for name in $(q -c "SELECT name FROM cpht_tables() WHERE shared AND name LIKE 'cpht\_bench\_%'"); do
		q -c "SELECT cpht_drop(cpht_open('$name'))" > /dev/null
	done
}

# Whether part $1 runs.
part() { [[ "$CPHT_BENCH_PARTS" == *"$1"* ]]; }

q -c "CREATE EXTENSION IF NOT EXISTS cpht" 2> /dev/null || true
# The mode, as cpht_worker_info() reports it; shared_preload_libraries is
# printed next to it.
if ! preloaded=$(q -c "SELECT cpht_worker_info()->>'preloaded'" 2>&1); then
	echo "shared-bench: cpht_worker_info() failed, so cpht is not installed or not usable in this database:" >&2
	echo "$preloaded" >&2
	exit 1
fi
spl=$(q -c "SHOW shared_preload_libraries")
case "$preloaded" in
	true) MODE=preloaded ;;
	false) MODE=plain ;;
	*) echo "shared-bench: cpht_worker_info() says preloaded is '$preloaded' (shared_preload_libraries = '$spl')" >&2; exit 1 ;;
esac
PLAIN=$([ "$MODE" = plain ] && echo true || echo false)
NA="n/a (plain server)"
: "${CPHT_BENCH_OUT:=test/bench/results/shared-$(date -u +%Y-%m-%d)-$MODE.md}"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$(dirname "$CPHT_BENCH_OUT")"
: > "$CPHT_BENCH_OUT"

$PLAIN || drop_bench_tables

# ---- devices ------------------------------------------------------------------
# A private table on CPHT_BENCH_DEVICE, else the CPU.
PDEV=$CPHT_BENCH_DEVICE
PNOTE=""
if ! r=$(PGOPTIONS="$PGOPTIONS -c cpht.device=$PDEV" try -c "SELECT cpht_info(cpht_create(1000))->>'device'"); then
	PNOTE="private tables: cpht.device=$PDEV refused ($(grep -m1 ERROR <<<"$r" | sed 's/^.*ERROR: *//')), so on the CPU"
	PDEV=cpu
	r=$(PGOPTIONS="$PGOPTIONS -c cpht.device=cpu" q -c "SELECT cpht_info(cpht_create(1000))->>'device'")
fi
PRIVATE_ON=$r
# A shared table on CPHT_BENCH_DEVICE, else the CPU; none on a plain server.
SDEV=$CPHT_BENCH_DEVICE
SNOTE=""
SHARED_ON=$NA
if $PLAIN; then
	:
elif ! r=$(PGOPTIONS="$PGOPTIONS -c cpht.device=$SDEV" try -c "SELECT cpht_create(1000, transactional => false, name => 'cpht_bench_probe')"); then
	SNOTE="shared tables: cpht.device=$SDEV refused ($(grep -m1 ERROR <<<"$r" | sed 's/^.*ERROR: *//')), so on the CPU"
	SDEV=cpu
	q -c "SET cpht.device = cpu" -c "SELECT cpht_create(1000, transactional => false, name => 'cpht_bench_probe')" > /dev/null
fi
if ! $PLAIN; then
	SHARED_ON=$(q -c "SELECT cpht_info(cpht_open('cpht_bench_probe'))->>'device'")
	drop_bench_tables
fi

GPU_NAME="none (nvidia-smi not found or no GPU)"
if has_smi; then
	GPU_NAME=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
fi
# On a plain server cpht's settings exist once this session has loaded the
# library, which the DO block's call does; the transfer settings exist only
# when preloaded.
CONF=$(q -c "DO \$\$ BEGIN PERFORM cpht_worker_info(); END \$\$" -c "SELECT format('%s; cpht.transfer_windows %s, cpht.transfer_chunk %s, cpht.cpu_threads %s; max_connections %s',
	version(), coalesce(current_setting('cpht.transfer_windows', true), 'n/a'),
	coalesce(current_setting('cpht.transfer_chunk', true), 'n/a'),
	current_setting('cpht.cpu_threads'), current_setting('max_connections'))")

out "# cpht shared-table benchmark: $MODE server"
out ""
note "mode: $MODE (shared_preload_libraries = '$spl')$($PLAIN && echo "; private tables only, each backend holds its own")"
note "parts run: $CPHT_BENCH_PARTS"
note "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host $(hostname), $(nproc) CPU cores"
note "GPU: $GPU_NAME"
note "server: $CONF"
note "cpht.device asked: $CPHT_BENCH_DEVICE; private tables on: $PRIVATE_ON; shared tables on: $SHARED_ON"
[ -z "$PNOTE" ] || note "$PNOTE"
[ -z "$SNOTE" ] || note "$SNOTE"
out ""
out "| measurement | shared table | private table | notes |"
out "| --- | --- | --- | --- |"
row() { out "| $1 | $2 | $3 | $4 |"; }

# ---- a. many connections with a private table; first-call latency -------------
if part a; then
	# Each connection creates a table, puts its keys, checks the count of new
	# keys, and names itself ready (or wrong) in application_name; it then
	# sleeps until it is terminated.
	max_conn=$(q -c "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') - 5")
	conns=$CPHT_BENCH_CONNS
	conn_note=""
	if [ "$conns" -gt "$max_conn" ]; then
		conn_note="$CPHT_BENCH_CONNS connections asked, $max_conn free below max_connections: ran with $max_conn"
		conns=$max_conn
	fi
	gpu_before=$(gpu_used_mib)
	for i in $(seq 1 "$conns"); do
		PGOPTIONS="$PGOPTIONS -c cpht.device=$PDEV" psql -X -q -At -v ON_ERROR_STOP=1 > /dev/null 2>&1 <<SQL &
SET application_name = 'cpht_bench_hold';
SELECT cpht_create($((CPHT_BENCH_CONN_KEYS * 2))) AS h \gset
SELECT set_config('application_name',
	CASE WHEN cardinality(cpht_fop_new(:h, array(SELECT generate_series(1::bigint, $CPHT_BENCH_CONN_KEYS)))) = $CPHT_BENCH_CONN_KEYS
	THEN 'cpht_bench_ready' ELSE 'cpht_bench_wrong' END, false);
SELECT pg_sleep(3600);
SQL
	done
	ready=0
	for _ in $(seq 1 600); do
		ready=$(q -c "SELECT count(*) FROM pg_stat_activity WHERE application_name IN ('cpht_bench_ready', 'cpht_bench_wrong')")
		[ "$ready" -ge "$conns" ] && break
		sleep 0.2
	done
	wrong=$(q -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cpht_bench_wrong'")
	gpu_during=$(gpu_used_mib)
	apps="n/a (no nvidia-smi)"
	if has_smi; then
		q -c "SELECT pid FROM pg_stat_activity WHERE application_name IN ('cpht_bench_ready', 'cpht_bench_wrong')" | sort > "$TMP/pids"
		nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | tr -d ' ' | tr ',' ' ' | sort > "$TMP/apps"
		join "$TMP/pids" "$TMP/apps" | awk '{ print $2 }' > "$TMP/app_mib" || true
		apps="$(wc -l < "$TMP/app_mib") of them GPU processes, MiB each: median $(pct 50 "$TMP/app_mib"), max $(pct 100 "$TMP/app_mib")"
		if $PLAIN; then
			apps="$apps; no cpht worker (plain server)"
		else
			worker_pid=$(q -c "SELECT cpht_worker_info()->>'worker_pid'")
			worker_mib=$(awk -v p="$worker_pid" '$1 == p { print $2 }' "$TMP/apps")
			apps="$apps; cpht worker: ${worker_mib:-no GPU memory} MiB"
		fi
		# Every process nvidia-smi lists, so that a context held outside the
		# connections and the worker shows too.
		apps="$apps; GPU processes in all: $(wc -l < "$TMP/apps")"
	fi
	q -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE 'cpht\_bench\_%'" > /dev/null
	wait || true
	per_conn="n/a"
	if [ "$gpu_before" != n/a ] && [ "$ready" -gt 0 ]; then
		per_conn=$(awk -v a="$gpu_before" -v b="$gpu_during" -v n="$ready" 'BEGIN { printf "%.0f", (b - a) / n }')
	fi
	row "a. $conns connections, each a private table of $CPHT_BENCH_CONN_KEYS keys: GPU memory used" "—" \
		"before ${gpu_before} MiB, all connected ${gpu_during} MiB, ${per_conn} MiB per connection" \
		"$ready of $conns ready, $wrong wrong answers; $apps${conn_note:+; $conn_note}"
	if [ "$ready" -lt "$conns" ] || [ "$wrong" -ne 0 ]; then
		echo "shared-bench: FAILED: $ready of $conns connections ready, $wrong wrong answers" >&2
		exit 1
	fi

	# First cpht_create + first cpht_fop of a new connection, timed inside the
	# session (the keys are built before the clock starts).
	first_call() { # device, name or empty, connection number -> "create_ms fop_ms ok"
		local dev=$1 name=$2 i=$3 create
		if [ -n "$name" ]; then
			create="h := cpht_open('$name');"
		else
			create="h := cpht_create($((CPHT_BENCH_RT_KEYS * 4)), transactional => false);"
		fi
		PGOPTIONS="$PGOPTIONS -c cpht.device=$dev" psql -X -q -At -v ON_ERROR_STOP=1 2>&1 <<SQL | sed 's/^NOTICE: *//'
DO \$\$
DECLARE
	keys bigint[] := array(SELECT (g << 32) | (hashint4(g::int)::bigint & 4294967295)
						   FROM generate_series($i::bigint * $CPHT_BENCH_RT_KEYS, $i::bigint * $CPHT_BENCH_RT_KEYS + $CPHT_BENCH_RT_KEYS - 1) g);
	t0 timestamptz; t1 timestamptz; t2 timestamptz;
	h int; r boolean[];
BEGIN
	t0 := clock_timestamp();
	$create
	t1 := clock_timestamp();
	r := cpht_fop(h, keys);
	t2 := clock_timestamp();
	RAISE NOTICE '% % %', extract(epoch FROM t1 - t0) * 1000, extract(epoch FROM t2 - t1) * 1000,
		(SELECT count(*) FROM unnest(r) f WHERE f) = $CPHT_BENCH_RT_KEYS;
END
\$\$;
SQL
	}
	$PLAIN || q -c "SET cpht.device = $SDEV" -c "SELECT cpht_create($((CPHT_BENCH_FIRST * CPHT_BENCH_RT_KEYS * 2)), transactional => false, name => 'cpht_bench_first')" > /dev/null
	: > "$TMP/first_p"
	: > "$TMP/first_s"
	for i in $(seq 1 "$CPHT_BENCH_FIRST"); do
		first_call "$PDEV" "" "$i" >> "$TMP/first_p"
		$PLAIN || first_call "$SDEV" cpht_bench_first "$i" >> "$TMP/first_s"
	done
	$PLAIN || drop_bench_tables
	for f in first_p $($PLAIN || echo first_s); do
		awk '{ print $1 + $2 }' "$TMP/$f" > "$TMP/$f.total"
		awk '{ print $1 }' "$TMP/$f" > "$TMP/$f.create"
		bad=$(awk '$3 != "t"' "$TMP/$f" | wc -l)
		got=$(wc -l < "$TMP/$f")
		if [ "$bad" -ne 0 ] || [ "$got" -ne "$CPHT_BENCH_FIRST" ]; then
			echo "shared-bench: FAILED: first calls ($f): $got of $CPHT_BENCH_FIRST ran, $bad wrong answers" >&2
			exit 1
		fi
	done
	first_s=$NA
	$PLAIN || first_s="$(pct 50 "$TMP/first_s.total") / $(pct 100 "$TMP/first_s.total") (open $(pct 50 "$TMP/first_s.create"))"
	row "a. first call of a new connection: create (private) or cpht_open (shared) + first $CPHT_BENCH_RT_KEYS-key cpht_fop, ms, median / max of $CPHT_BENCH_FIRST" \
		"$first_s" \
		"$(pct 50 "$TMP/first_p.total") / $(pct 100 "$TMP/first_p.total") (create $(pct 50 "$TMP/first_p.create"))" \
		"timed inside the session with clock_timestamp(); every answer checked"
fi

# ---- b. round trip of a small cpht_fop on an existing table --------------------
if part b; then
	# The client round trip (pgbench, one client, simple protocol) on a shared
	# table: the same keys every call, new on the first and found after.
	if $PLAIN; then
		row "b. client round trip of a $CPHT_BENCH_RT_KEYS-key cpht_fop (pgbench, cpht_open each call), ms, median / p99" \
			"$NA" "—" "needs a shared table"
	else
		q -c "SET cpht.device = $SDEV" -c "SELECT cpht_create($((CPHT_BENCH_RT_KEYS * (CPHT_BENCH_RT_CALLS + 4))), transactional => false, name => 'cpht_bench_rt')" > /dev/null
		keys=$(seq -s, 1 "$CPHT_BENCH_RT_KEYS" | awk '{ print "{" $0 "}" }')
		echo "SELECT cardinality(cpht_fop(cpht_open('cpht_bench_rt'), '$keys'::bigint[]));" > "$TMP/rt.pgbench"
		(cd "$TMP" && pgbench -n -c 1 -t "$CPHT_BENCH_RT_CALLS" -f rt.pgbench -l --log-prefix=rt > pgbench.out 2>&1) || {
			cat "$TMP/pgbench.out" >&2
			echo "shared-bench: FAILED: pgbench" >&2
			exit 1
		}
		cat "$TMP"/rt.* 2>/dev/null | awk 'NF >= 6 { print $3 / 1000 }' > "$TMP/rt_ms"
		failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$TMP/pgbench.out")
		row "b. client round trip of a $CPHT_BENCH_RT_KEYS-key cpht_fop (pgbench, cpht_open each call), ms, median / p99 of $(wc -l < "$TMP/rt_ms")" \
			"$(pct 50 "$TMP/rt_ms") / $(pct 99 "$TMP/rt_ms")" "—" "keys sent as a literal; ${failed:-0} failed transactions"
	fi
	# The call alone, timed inside the session, on a shared and a private table:
	# a fresh window of keys each call (half of them found, half new).
	call_loop() { # device, name or empty
		local dev=$1 name=$2 handle
		if [ -n "$name" ]; then handle="cpht_open('$name')"; else handle="cpht_create($((CPHT_BENCH_RT_KEYS * (CPHT_BENCH_RT_CALLS + 2))), transactional => false)"; fi
		PGOPTIONS="$PGOPTIONS -c cpht.device=$dev" psql -X -q -At -v ON_ERROR_STOP=1 2>&1 <<SQL | sed 's/^NOTICE: *//'
DO \$\$
DECLARE
	h int := $handle;
	n int := $CPHT_BENCH_RT_KEYS;
	keys bigint[];
	r boolean[];
	t0 timestamptz;
	bad int := 0;
BEGIN
	FOR i IN 0 .. $CPHT_BENCH_RT_CALLS - 1 LOOP
		keys := array(SELECT g FROM generate_series(1000000000::bigint + i * (n / 2), 1000000000::bigint + i * (n / 2) + n - 1) g);
		t0 := clock_timestamp();
		r := cpht_fop(h, keys);
		RAISE NOTICE '%', extract(epoch FROM clock_timestamp() - t0) * 1000;
		IF (SELECT count(*) FROM unnest(r) f WHERE f) <> (CASE WHEN i = 0 THEN n ELSE n - n / 2 END) THEN
			bad := bad + 1;
		END IF;
	END LOOP;
	RAISE NOTICE 'bad %', bad;
END
\$\$;
SQL
	}
	$PLAIN || call_loop "$SDEV" cpht_bench_rt > "$TMP/loop_s"
	call_loop "$PDEV" "" > "$TMP/loop_p"
	for f in $($PLAIN || echo loop_s) loop_p; do
		if ! grep -qx 'bad 0' "$TMP/$f"; then
			echo "shared-bench: FAILED: call loop ($f): $(grep '^bad' "$TMP/$f" || echo 'did not finish')" >&2
			exit 1
		fi
		grep -v '^bad' "$TMP/$f" > "$TMP/$f.ms"
	done
	loop_s=$NA
	if ! $PLAIN; then
		drop_bench_tables
		loop_s="$(pct 50 "$TMP/loop_s.ms") / $(pct 99 "$TMP/loop_s.ms")"
	fi
	row "b. the $CPHT_BENCH_RT_KEYS-key cpht_fop call alone (PL/pgSQL loop, clock_timestamp), ms, median / p99 of $CPHT_BENCH_RT_CALLS" \
		"$loop_s" "$(pct 50 "$TMP/loop_p.ms") / $(pct 99 "$TMP/loop_p.ms")" \
		"half of each call's keys new; every answer checked"
fi

# ---- c. one large cpht_fop -------------------------------------------------------
if part c; then
	# The keys are distinct (a counter in the high half), built once in a
	# temporary table and read into a PL/pgSQL variable before the clock
	# starts; each repetition puts them into a fresh table.  cpht.trace's
	# NOTICE splits the call; where a call gives none, only the time around
	# it is reported.  One session runs every repetition; its output has a
	# line "s|p wall_ms trace_table_ms|none ok" per call.
	big_sql() { # shared (s) or private (p) -> the SQL of one repetition
		local handle
		if [ "$1" = s ]; then
			echo "SET cpht.device = $SDEV;"
			echo "SELECT cpht_create($((CPHT_BENCH_BIG_KEYS * 2)), transactional => false, name => 'cpht_bench_big') > 0 AS created \\gset"
			handle="cpht_open('cpht_bench_big')"
		else
			echo "SET cpht.device = $PDEV;"
			handle="cpht_create($((CPHT_BENCH_BIG_KEYS * 2)), transactional => false)"
		fi
		cat <<SQL
DO \$\$
DECLARE
	h int := $handle;
	keys bigint[];
	t0 timestamptz;
	r boolean[];
BEGIN
	SELECT b.keys INTO keys FROM cpht_bench_keys b;
	RAISE NOTICE 'call $1';
	t0 := clock_timestamp();
	r := cpht_fop(h, keys);
	RAISE NOTICE 'wall % %', extract(epoch FROM clock_timestamp() - t0) * 1000,
		(SELECT count(*) FROM unnest(r) f WHERE f) = $CPHT_BENCH_BIG_KEYS;
	IF '$1' = 'p' THEN
		PERFORM cpht_drop(h);
	END IF;
END
\$\$;
SQL
		if [ "$1" = s ]; then
			echo "SELECT cpht_drop(cpht_open('cpht_bench_big'));"
		fi
	}
	{
		echo "CREATE TEMP TABLE cpht_bench_keys AS SELECT array(SELECT (g << 32) | (hashint4(g::int)::bigint & 4294967295) FROM generate_series(1::bigint, $CPHT_BENCH_BIG_KEYS) g) AS keys;"
		for rep in $(seq 1 "$CPHT_BENCH_BIG_REPS"); do
			$PLAIN || big_sql s
			big_sql p
		done
	} > "$TMP/big.sql"
	PGOPTIONS="$PGOPTIONS -c cpht.trace=on" psql -X -q -At -v ON_ERROR_STOP=1 -f "$TMP/big.sql" > "$TMP/big.out" 2>&1 || true
	# One line per call: table (s or p), the time around it, cpht.trace's
	# table time, whether the answer was right, then the split of the
	# table call (- where its NOTICE did not come): inside a backend's
	# table call, staging keys, waiting for the device, copying results and
	# the undo log; for a call streamed through the cpht worker, the
	# session copying keys in, copying statuses out and waiting, and the
	# worker running pieces and waiting for them.  psql -f puts
	# "psql:FILE:LINE: " before each NOTICE.
	awk 'function flush() { if (k != "") printf "%s %s %s %s %s %s %s %s %s %s %s %s %s\n", k, w, (t == "" ? "none" : t), ok,
				v["stage"], v["wait"], v["copy"], v["undo"], v["in"], v["out"], v["swait"], v["run"], v["wwait"] }
		 function num(pat,   m) { return match($0, pat) ? substr($0, RSTART, RLENGTH) : "-" }
		 function ms(pat,   x) { x = num(pat "[0-9.]+"); sub(pat, "", x); return x }
		 { sub(/^(psql:[^ ]*: )?(NOTICE|DETAIL): +/, "") }
		 /^call / { flush(); k = $2; w = ""; t = ""; ok = ""; split("stage wait copy undo in out swait run wwait", n, " "); for (i in n) v[n[i]] = "-" }
		 /^cpht_fop: / { for (i = 1; i <= NF; i++) if ($i == "table") t = $(i + 1) }
		 /^Inside the table call: / { v["stage"] = ms("staging keys "); v["wait"] = ms("waiting for the device "); v["copy"] = ms("copying results "); v["undo"] = ms("undo log ") }
		 /^This session copied keys in / { v["in"] = ms("keys in for "); v["out"] = ms("statuses out for "); v["swait"] = ms("waited for the worker "); v["run"] = ms("table calls for "); v["wwait"] = ms("waited for pieces ") }
		 /^wall / { w = $2; ok = $3 }
		 END { flush() }' "$TMP/big.out" > "$TMP/big"
	awk '$1 == "s" { $1 = ""; print }' "$TMP/big" | sed 's/^ //' > "$TMP/big_s"
	awk '$1 == "p" { $1 = ""; print }' "$TMP/big" | sed 's/^ //' > "$TMP/big_p"
	for f in $($PLAIN || echo big_s) big_p; do
		if awk '$3 != "t"' "$TMP/$f" | grep -q . || [ "$(wc -l < "$TMP/$f")" -ne "$CPHT_BENCH_BIG_REPS" ]; then
			echo "shared-bench: FAILED: large call ($f): $(cat "$TMP/$f")" >&2
			grep -v 'NOTICE:  call \|NOTICE:  wall \|NOTICE:  cpht_fop: \|DETAIL:  Inside' "$TMP/big.out" | head -5 >&2 || true
			exit 1
		fi
		awk '{ print $1 }' "$TMP/$f" > "$TMP/$f.wall"
		awk '$2 != "none" { print $2 }' "$TMP/$f" > "$TMP/$f.trace"
	done
	# Median of column $2 of file $1, or nothing where the column is all -.
	col_pct() { awk -v c="$2" '$c != "-" { print $c }' "$1" > "$TMP/col"; [ -s "$TMP/col" ] && pct 50 "$TMP/col"; }
	# The split of a table's calls, medians of each part, where cpht.trace gave one.
	split_of() {
		local f=$1 s=""
		if [ -n "$(col_pct "$f" 8)" ]; then
			s="session: keys in $(col_pct "$f" 8), statuses out $(col_pct "$f" 9), waiting $(col_pct "$f" 10); worker: pieces $(col_pct "$f" 11), waiting $(col_pct "$f" 12)"
		fi
		if [ -n "$(col_pct "$f" 4)" ]; then
			s="${s:+$s; }table call: staging keys $(col_pct "$f" 4), waiting for the device $(col_pct "$f" 5), copying results $(col_pct "$f" 6), undo log $(col_pct "$f" 7)"
		fi
		echo "${s:-no split}"
	}
	trace_of() { if [ -s "$1" ]; then echo "cpht.trace table $(pct 50 "$1") ms"; else echo "no cpht.trace line"; fi; }
	big_s=$NA
	$PLAIN || big_s="call $(pct 50 "$TMP/big_s.wall"); $(trace_of "$TMP/big_s.trace")"
	row "c. one $CPHT_BENCH_BIG_KEYS-key cpht_fop on a fresh table, ms, median of $CPHT_BENCH_BIG_REPS" \
		"$big_s" \
		"call $(pct 50 "$TMP/big_p.wall"); $(trace_of "$TMP/big_p.trace")" \
		"all keys new, checked; call = clock_timestamp() around the call inside the session"
	split_s=$NA
	$PLAIN || split_s=$(split_of "$TMP/big_s")
	row "c. where the time of that call went (cpht.trace), ms, medians of $CPHT_BENCH_BIG_REPS" \
		"$split_s" "$(split_of "$TMP/big_p")" \
		"a call larger than a transfer window streams through the cpht worker: the session's copies and waits, the worker's table calls and waits; a table call in a backend or in the worker: its staging, device and copy times"
	# every call's line, for scripts that set runs side by side
	if [ -n "$CPHT_BENCH_CALLS_OUT" ]; then
		for f in $($PLAIN || echo big_s) big_p; do
			sed "s/^/${f#big_} /" "$TMP/$f"
		done > "$CPHT_BENCH_CALLS_OUT"
	fi
fi

# ---- d. concurrent sessions on one shared table ----------------------------------
if part d; then
	if $PLAIN; then
		row "d. $CPHT_BENCH_SESSIONS sessions find-or-putting $CPHT_BENCH_BATCH-key batches into one shared table for ${CPHT_BENCH_SECONDS} s" \
			"$NA" "—" "needs a shared table"
	else
		# Session s puts batches of B consecutive keys from s * 2^40 on, each batch
		# starting B/2 after the previous one: the first batch is all new, each later
		# one has B - B/2 new keys (the rest the previous batch put).  Sessions never
		# overlap.  So that any run length fits the table, a session that has put
		# its share of the capacity starts again from its first batch, whose keys
		# are then all found (0 new).
		B=$CPHT_BENCH_BATCH
		S=$CPHT_BENCH_SESSIONS
		ring=$(( (CPHT_BENCH_CAPACITY * 9 / 10 / S - B) / (B / 2) + 1 ))
		if [ "$ring" -lt 1 ]; then
			echo "shared-bench: CPHT_BENCH_CAPACITY $CPHT_BENCH_CAPACITY holds no batch of $B keys per session for $S sessions" >&2
			exit 2
	fi
	q -c "SET cpht.device = $SDEV" -c "SELECT cpht_create($CPHT_BENCH_CAPACITY, transactional => false, name => 'cpht_bench_conc')" > /dev/null
	# Each session builds its ring of batches before the clock starts, so
	# that the run measures the calls, not building arrays: a batch is a
	# bigint[] in a composite, and (ring[w]).keys hands the array to the
	# call without copying it.  The sessions then wait at a gate (an
	# advisory lock this script holds) and start together.
	q -c "DROP TYPE IF EXISTS cpht_bench_batch" -c "CREATE TYPE cpht_bench_batch AS (keys bigint[])"
	GATE=727274
	mkfifo "$TMP/gate"
	q < "$TMP/gate" &
	gate_pid=$!
	exec 3> "$TMP/gate"
	echo "SELECT pg_advisory_lock($GATE);" >&3
	until [ "$(q -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $GATE AND granted")" = 1 ]; do
		sleep 0.1
	done
	loader() { # session number -> "batches keys new bad start_epoch end_epoch call_ms"
		PGOPTIONS="$PGOPTIONS -c cpht.device=$SDEV" psql -X -q -At -v ON_ERROR_STOP=1 2>&1 <<SQL | sed 's/^NOTICE: *//'
DO \$\$
DECLARE
	h int := cpht_open('cpht_bench_conc');
	b bigint := $B;
	base bigint := $1::bigint << 40;
	ring cpht_bench_batch[];
	t_start timestamptz;
	t_end timestamptz;
	t0 timestamptz;
	call_s float8 := 0;
	i int := 0;
	w int;
	first bigint;
	n bigint;
	new_keys bigint := 0;
	bad int := 0;
BEGIN
	FOR r IN 0..$ring - 1 LOOP
		first := base + r * (b / 2);
		ring[r + 1] := ROW(array(SELECT generate_series(first, first + b - 1)))::cpht_bench_batch;
	END LOOP;
	PERFORM pg_advisory_lock_shared($GATE);
	PERFORM pg_advisory_unlock_shared($GATE);
	t_start := clock_timestamp();
	t_end := t_start + interval '$CPHT_BENCH_SECONDS seconds';
	WHILE clock_timestamp() < t_end LOOP
		w := i % $ring;
		t0 := clock_timestamp();
		n := cardinality(cpht_fop_new(h, (ring[w + 1]).keys));
		call_s := call_s + extract(epoch FROM clock_timestamp() - t0);
		IF n <> (CASE WHEN i >= $ring THEN 0 WHEN w = 0 THEN b ELSE b - b / 2 END) THEN
			bad := bad + 1;
		END IF;
		new_keys := new_keys + n;
		i := i + 1;
	END LOOP;
	RAISE NOTICE '% % % % % % %', i, i * b, new_keys, bad, extract(epoch FROM t_start),
		extract(epoch FROM clock_timestamp()), call_s * 1000;
END
\$\$;
SQL
	}
	loaders=
	for s in $(seq 0 $((S - 1))); do
		loader "$s" > "$TMP/conc.$s" &
		loaders="$loaders $!"
	done
	# open the gate once every session waits at it (or has failed)
	while :; do
		waiting=$(q -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $GATE AND NOT granted")
		running=0
		for l in $loaders; do kill -0 "$l" 2> /dev/null && running=$((running + 1)); done
		[ "$waiting" -ge "$running" ] && break
		sleep 0.2
	done
	echo "SELECT pg_advisory_unlock($GATE);" >&3
	exec 3>&-
	wait $loaders || true
	wait "$gate_pid" || true
	q -c "DROP TYPE cpht_bench_batch"
	cat "$TMP"/conc.* > "$TMP/conc"
	count=$(q -c "SELECT cpht_count(cpht_open('cpht_bench_conc'))")
	drop_bench_tables
	read -r batches sent new_keys bad t_first t_last call_ms <<<"$(awk '
		NF == 7 { b += $1; k += $2; n += $3; bad += $4; if (s == "" || $5 < s) s = $5; if ($6 > e) e = $6; c += $7 }
		END { printf "%d %d %d %d %s %s %.0f\n", b, k, n, bad, s, e, c }' "$TMP/conc")"
	sessions_done=$(awk 'NF == 7' "$TMP/conc" | wc -l)
	# every new key is counted once: the table holds exactly the keys reported new
	if [ "$sessions_done" -ne "$S" ] || [ "$bad" -ne 0 ] || [ "$count" -ne "$new_keys" ]; then
		echo "shared-bench: FAILED: concurrent sessions: $sessions_done of $S finished, $bad batches with a wrong count of new keys, table count $count, keys reported new $new_keys" >&2
		grep -hv '^[0-9]' "$TMP"/conc.* | head -5 >&2 || true
		exit 1
	fi
	secs=$(awk -v a="$t_first" -v b="$t_last" 'BEGIN { printf "%.2f", b - a }')
	row "d. $S sessions find-or-putting $B-key batches into one shared table for ${CPHT_BENCH_SECONDS} s" \
		"$(awk -v k="$sent" -v s="$secs" 'BEGIN { printf "%.1f M keys/s", k / s / 1e6 }') ($batches batches, $sent keys in $secs s; calls $(awk -v c="$call_ms" -v s="$secs" -v n="$S" 'BEGIN { printf "%.0f%%", c / 1000 / s / n * 100 }') of session time)" \
		"—" "every batch's count of new keys checked ($new_keys new, table count equal); each session revisits its keys after $ring batches (then 0 new)"
	fi
fi

# ---- e. loaders with rollbacks on a transactional shared table -------------------
if part e; then
	if $PLAIN; then
		row "e. $CPHT_BENCH_LOADERS loaders with rollbacks on a transactional shared table" "$NA" "—" "needs a shared table"
	elif ! r=$(q -c "SET cpht.device = $SDEV" -c "SELECT cpht_create($CPHT_BENCH_CAPACITY, name => 'cpht_bench_txn')" 2>&1); then
		row "e. $CPHT_BENCH_LOADERS loaders with rollbacks on a transactional shared table" "skipped" "—" \
			"the server refused one: $(grep -m1 ERROR <<<"$r" | sed 's/^.*ERROR: *//')"
	else
		# Each loader puts its batches in transactions; every third is rolled
		# back after the put and must find its keys new again when repeated.
		B=$CPHT_BENCH_BATCH
		txn_loader() {
			PGOPTIONS="$PGOPTIONS -c cpht.device=$SDEV" psql -X -q -At -v ON_ERROR_STOP=1 2>&1 <<SQL
DO \$\$
DECLARE
	h int := cpht_open('cpht_bench_txn');
	b bigint := $B;
	base bigint := $1::bigint << 40;
	t_start timestamptz := clock_timestamp();
	t_end timestamptz := clock_timestamp() + interval '$CPHT_BENCH_SECONDS seconds';
	i int := 0;
	rollbacks int := 0;
	bad int := 0;
	n bigint;
BEGIN
	WHILE clock_timestamp() < t_end AND (i + 1) * b <= ${CPHT_BENCH_CAPACITY}::bigint * 9 / 10 / $CPHT_BENCH_LOADERS LOOP
		n := cardinality(cpht_fop_new(h, array(SELECT generate_series(base + i * b, base + i * b + b - 1))));
		IF n <> b THEN bad := bad + 1; END IF;
		IF i % 3 = 2 THEN
			ROLLBACK;
			rollbacks := rollbacks + 1;
			n := cardinality(cpht_fop_new(h, array(SELECT generate_series(base + i * b, base + i * b + b - 1))));
			IF n <> b THEN bad := bad + 1; END IF;
		END IF;
		COMMIT;
		i := i + 1;
	END LOOP;
	RAISE NOTICE '% % % % %', i, rollbacks, bad, extract(epoch FROM t_start), extract(epoch FROM clock_timestamp());
END
\$\$;
SQL
		}
		for s in $(seq 0 $((CPHT_BENCH_LOADERS - 1))); do
			txn_loader "$s" > "$TMP/txn.$s" &
		done
		wait
		# each loader's last NOTICE is its tally; anything else is an error
		cat "$TMP"/txn.* | sed -n 's/^NOTICE: *//p' > "$TMP/txn"
		count=$(q -c "SELECT cpht_count(cpht_open('cpht_bench_txn'))")
		drop_bench_tables
		read -r batches rollbacks bad t_first t_last <<<"$(awk '
			NF == 5 { b += $1; r += $2; bad += $3; if (s == "" || $4 < s) s = $4; if ($5 > e) e = $5 }
			END { printf "%d %d %d %s %s\n", b, r, bad, s, e }' "$TMP/txn")"
		done_loaders=$(awk 'NF == 5' "$TMP/txn" | wc -l)
		if [ "$done_loaders" -ne "$CPHT_BENCH_LOADERS" ] || [ "$bad" -ne 0 ] || [ "$count" -ne $((batches * B)) ]; then
			echo "shared-bench: FAILED: transactional loaders: $done_loaders of $CPHT_BENCH_LOADERS finished, $bad wrong counts, table count $count for $batches committed batches of $B" >&2
			grep -hv '^NOTICE:' "$TMP"/txn.* | head -5 >&2 || true
			exit 1
		fi
		secs=$(awk -v a="$t_first" -v b="$t_last" 'BEGIN { printf "%.2f", b - a }')
		row "e. $CPHT_BENCH_LOADERS loaders with rollbacks on a transactional shared table" \
			"$(awk -v k="$((batches * B))" -v s="$secs" 'BEGIN { printf "%.1f M committed keys/s", k / s / 1e6 }') ($batches batches committed, $rollbacks rolled back and repeated, $secs s)" \
			"—" "every count checked; the table holds exactly the committed keys"
	fi
fi

out ""
echo "results written to $CPHT_BENCH_OUT"
