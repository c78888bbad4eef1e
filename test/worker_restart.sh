#!/bin/bash
# Restarts of the cpht worker alone (SIGTERM, the server goes on) while
# loaders change a durable transactional shared table, on a preloaded
# throwaway server (run-tests.sh, in the pg_virtualenv cluster "regress";
# PGVERSION names it), or on another preloaded server that this script may
# restart: CPHT_PG_CTL is then a command that takes restart.
#
# Each loader runs transactions that find-or-put a batch and record the
# ids reported new in an ordinary table (primary key) in the same
# transaction, add more in a savepoint that is released or rolled back,
# hold the transaction open a moment, and commit or roll back.  An
# ordinary prepared transaction stays open across every restart.  In each
# of CPHT_RESTART_ROUNDS rounds (default 12) the worker gets a SIGTERM at a
# random moment while transactions hold keys; afterwards:
#   - the table holds exactly the committed ids (none lost, none extra);
#   - no id was reported new twice (a second commit of it would break the
#     primary key);
#   - the new worker served while the prepared transaction was open;
#   - no loader statement waited past its statement_timeout (10 s), and no
#     loader needed the 30 s kill of its client.
# Every session runs with cpht.device from CPHT_TEST_DEVICE (PGOPTIONS).
set -euo pipefail

: "${CPHT_RESTART_ROUNDS:=12}"
db=cpht_wrestart
read -r -a cluster <<<"${CPHT_PG_CTL:-pg_ctlcluster ${PGVERSION:-} regress}"
logfile=${CPHT_PG_LOG:-$(pg_lsclusters -h | awk -v v="${PGVERSION:-}" '$1 == v && $2 == "regress" { print $7 }')}
failures=0
work=$(mktemp -d)
chmod 777 "$work"

fail() {
	echo "== FAILED: $*"
	failures=$((failures + 1))
}

q() {
	psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"
}

worker_pid() {
	psql -X -q -At -d "$db" -c "SELECT cpht_worker_info()->>'worker_pid'" 2>/dev/null || true
}

# Prepared transactions need max_prepared_transactions, a server setting.
prepared_before=$(psql -X -q -At -d postgres -c "SHOW max_prepared_transactions")
if [ "$prepared_before" = 0 ]; then
	psql -X -q -d postgres -c "ALTER SYSTEM SET max_prepared_transactions = 4" > /dev/null
	"${cluster[@]}" restart
fi

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "SET client_min_messages = warning" \
	-c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" > /dev/null
q > /dev/null <<'SQL'
CREATE EXTENSION cpht;
CREATE TABLE committed_ids (id bigint PRIMARY KEY);
CREATE TABLE unrelated (v int);
SELECT cpht_create(1000, key_bits => 32, name => 'w_load', durable => true);
SQL

# What a session sees across a restart of the worker alone: its old handle
# of a durable table says the worker restarted (not that the table was
# dropped), cpht_open reaches the restored table, and right after the new
# worker started cpht_tables() lists the durable table and a new durable
# table can be created (both wait for the restore).
out=$(psql -X -q -At -d "$db" 2>&1 <<'SQL' || true
SELECT cpht_put(cpht_open('w_load'), '{1,2,3}') AS put \gset
SELECT cpht_open('w_load') AS h, cpht_worker_info()->>'worker_pid' AS w \gset
SELECT set_config('cpht_check.starts', cpht_worker_info()->>'worker_starts', false);
SELECT format('COPY (SELECT 1) TO PROGRAM %L', 'cat > /dev/null; kill -TERM ' || :'w') \gexec
DO $$ BEGIN
	FOR i IN 1..300 LOOP
		EXIT WHEN (cpht_worker_info()->>'worker_starts')::int > current_setting('cpht_check.starts')::int
			AND cpht_worker_info()->>'worker_pid' IS NOT NULL;
		PERFORM pg_sleep(0.01);
	END LOOP;
END $$;
SELECT 'listed ' || count(*) FROM cpht_tables() WHERE name = 'w_load';
SELECT 'created ' || (cpht_create(1000, name => 'w_other', durable => true) > 0);
SELECT cpht_count(:h);
SELECT 'reopened ' || cpht_count(cpht_open('w_load'));
SELECT cpht_drop(cpht_open('w_other'));
SQL
)
if ! grep -q "^listed 1$" <<<"$out" || ! grep -q "^created true$" <<<"$out" ||
	! grep -q "cpht table [0-9]* was opened before the cpht worker restarted" <<<"$out" ||
	! grep -q "^reopened 3$" <<<"$out"; then
	fail "across a restart of the worker alone (durable table listed and created at once, old handle named, reopened): $out"
else
	echo "== worker restart: the durable table is listed and a new one created right after the restart; the old handle says the worker restarted; cpht_open reaches the restored table"
fi
q -c "SELECT cpht_delete(cpht_open('w_load'), '{1,2,3}')" > /dev/null

# While the restore waits for a transaction that holds changes of the
# durable table, the new worker serves what needs no durable table (a
# private table in the worker, created and counted); the transaction then
# commits and its key stays.
holder_log=$work/holder.log
psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" > "$holder_log" 2>&1 <<'SQL' &
BEGIN;
SELECT cpht_fop_new(cpht_open('w_load'), '{900001}');
SELECT pg_sleep(5);
COMMIT;
SQL
holder=$!
sleep 1
old=$(worker_pid)
kill -TERM "$old"
for _ in $(seq 1 100); do
	new=$(worker_pid)
	[ -n "$new" ] && [ "$new" != "$old" ] && break
	sleep 0.05
done
t0=$(date +%s.%N)
out=$(psql -X -q -At -d "$db" -c "SET cpht.placement = worker" -c "SET statement_timeout = '2s'" \
	-c "SELECT 'private ' || cpht_count(cpht_create(1000))" 2>&1 || true)
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
holder_open=$(kill -0 "$holder" 2>/dev/null && echo yes || echo no)
wait "$holder" || true
kept=$(q -c "SELECT cpht_find(cpht_open('w_load'), '{900001}')::text" 2>&1 || true)
if [ "$out" != "private 0" ] || [ "$holder_open" != yes ]; then
	fail "while the restore waits for an open transaction, a private table in the worker is not served (after $took s, the transaction still open: $holder_open): $out"
elif [ "$kept" != "{t}" ] || ! grep -q '^{900001}$' "$holder_log"; then
	fail "the key of the transaction the restore waited for is not kept after its commit: $kept; $(cat "$holder_log")"
else
	echo "== worker restart: while the restore waited for an open transaction, a private table in the worker was created and counted in $took s; the transaction's key is kept after its commit"
fi
q -c "SELECT cpht_delete(cpht_open('w_load'), '{900001}')" > /dev/null

# One loader: transactions as above, each psql session killed after 30 s
# (a statement_timeout of 10 s should always come first).
loader() {
	local seed=$1 log=$2 rc
	while [ ! -f "$stop" ]; do
		rc=0
		timeout -s KILL 30 psql -X -q -v ON_ERROR_STOP=1 -d "$db" > /dev/null 2>> "$log" <<SQL || rc=$?
SET statement_timeout = '10s';
SELECT setseed(($seed * 7919 + extract(epoch from clock_timestamp())::bigint % 100000) / 1e6 - 0.5);
BEGIN;
SELECT cpht_open('w_load') AS h \gset
INSERT INTO committed_ids
	SELECT unnest(cpht_fop_new(:h, ARRAY(SELECT (random() * 20000)::bigint FROM generate_series(1, 100))));
SAVEPOINT s;
INSERT INTO committed_ids
	SELECT unnest(cpht_fop_new(:h, ARRAY(SELECT (random() * 20000)::bigint FROM generate_series(1, 30))));
SELECT CASE WHEN random() < 0.3 THEN 'ROLLBACK TO SAVEPOINT s' ELSE 'RELEASE SAVEPOINT s' END \gexec
SELECT pg_sleep(random() * 0.3);
INSERT INTO committed_ids
	SELECT unnest(cpht_fop_new(:h, ARRAY(SELECT (random() * 20000)::bigint FROM generate_series(1, 30))));
SELECT CASE WHEN random() < 0.3 THEN 'ROLLBACK' ELSE 'COMMIT' END \gexec
SQL
		if [ $rc = 137 ]; then
			echo "LOADER KILLED after 30 s" >> "$log"
		fi
	done
}

check_table() {
	local what=$1 res
	res=$(q <<'SQL'
SET statement_timeout = '30s';
SELECT cpht_open('w_load') AS h \gset
SELECT (SELECT count(*) FROM committed_ids) || ' ' || cpht_count(:h) || ' ' ||
	(SELECT count(*) FILTER (WHERE NOT f) FROM unnest(cpht_find(:h, ARRAY(SELECT id FROM committed_ids))) f) || ' ' ||
	(SELECT count(*) FILTER (WHERE f) FROM unnest(cpht_find(:h, ARRAY(
		SELECT g FROM generate_series(0, 20000) g EXCEPT SELECT id FROM committed_ids))) f);
SQL
) || { fail "after $what the table cannot be read"; return; }
	read -r n count missing extra <<<"$res"
	if [ "$count" != "$n" ] || [ "$missing" != 0 ] || [ "$extra" != 0 ]; then
		fail "after $what: $n committed ids, the table counts $count, misses $missing and has $extra others"
	else
		echo "== worker restart: after $what the table holds exactly the $n committed ids"
	fi
}

stop=$work/stop
start=$SECONDS
trap 'touch "$stop"' EXIT
for round in $(seq 1 "$CPHT_RESTART_ROUNDS"); do
	rm -f "$stop"
	# an ordinary prepared transaction, open across the restart
	q -c "BEGIN" -c "INSERT INTO unrelated VALUES ($round)" -c "PREPARE TRANSACTION 'unrelated_$round'"
	pids=()
	for l in 1 2 3 4; do
		loader $((round * 10 + l)) "$work/loader_$round.log" &
		pids+=($!)
	done
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.1f", 1.0 + (r % 20) / 10 }')"
	old=$(worker_pid)
	kill -TERM "$old"
	# the new worker serves while the prepared transaction stays open
	served=""
	for _ in $(seq 1 100); do
		new=$(worker_pid)
		if [ -n "$new" ] && [ "$new" != "$old" ] &&
			q -c "SET statement_timeout = '5s'" -c "SELECT cpht_count(cpht_open('w_load'))" > /dev/null 2>&1; then
			served=yes
			break
		fi
		sleep 0.1
	done
	[ -n "$served" ] || fail "round $round: no new worker served within 10 s while a prepared transaction was open"
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.1f", 0.5 + (r % 10) / 10 }')"
	touch "$stop"
	wait "${pids[@]}" 2>/dev/null || true
	q -c "COMMIT PREPARED 'unrelated_$round'"
	if grep -q "duplicate key" "$work/loader_$round.log"; then
		fail "round $round: an id was reported new twice: $(grep -m1 'duplicate key' "$work/loader_$round.log")"
	fi
	if grep -q "statement timeout\|LOADER KILLED" "$work/loader_$round.log"; then
		fail "round $round: a loader waited past its statement_timeout: $(grep -m1 'statement timeout\|LOADER KILLED' "$work/loader_$round.log")"
		[ -z "$logfile" ] || grep -B30 -A6 'statement timeout' "$logfile" | tail -80 || true
	fi
	check_table "round $round (SIGTERM of the worker alone)"
done
rm -f "$stop"
trap - EXIT
echo "== worker restart: $CPHT_RESTART_ROUNDS rounds in $((SECONDS - start)) s; errors the loaders saw (expected while the worker restarts):"
cat "$work"/loader_*.log | grep -o 'ERROR: .*' | sed 's/transaction [0-9]*/transaction N/; s/process [0-9]*/process N/' |
	sort | uniq -c | sort -rn | head -8 || true

q -c "SELECT cpht_drop(cpht_open('w_load'))" > /dev/null || fail "dropping w_load"
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE $db" > /dev/null || true
if [ "$prepared_before" = 0 ]; then
	psql -X -q -d postgres -c "ALTER SYSTEM RESET max_prepared_transactions" > /dev/null
	"${cluster[@]}" restart
fi
rm -rf "$work"

if [ $failures -ne 0 ]; then
	echo "== FAILED: $failures worker restart checks"
	exit 1
fi
echo "== worker restart: all checks passed"
