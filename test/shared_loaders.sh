#!/bin/bash
# The loaders property of transactional shared tables, for both kinds:
# concurrent sessions (pgbench) load overlapping random batches of ids
# into one shared table, record the ids cpht_fop_new reports new, and
# roll back at random (whole transactions and savepoints).  Afterwards:
#   - the ids reported new are exactly the distinct ids of committed
#     batches (each reported once: reported has a primary key);
#   - cpht_count is their number, each is found, and no id that was only
#     in rolled-back batches is in the table;
#   - the table, created for 1000 ids, grew while the sessions loaded it.
# Needs a server with cpht preloaded, reached through PGHOST/PGPORT, and
# the cpht extension in database $1.
#
#   CPHT_LOADERS_TXNS=N   transactions per client (default 150; 8 clients)
set -euo pipefail

db=$1
: "${CPHT_LOADERS_TXNS:=150}"
clients=8
# ids drawn from: enough that some occur only in rolled-back batches even
# in a long run (about 3 attempts per id), never fewer than 10000
universe=$((70 * CPHT_LOADERS_TXNS))
[ "$universe" -ge 10000 ] || universe=10000
script="$(dirname "$0")/pgbench/shared_loaders.pgbench"
pgbench=$(pg_config --bindir)/pgbench
failed=0

for kind in iceberg cuckoo; do
	tname="loaders_$kind"
	psql -X -q -v ON_ERROR_STOP=1 -d "$db" > /dev/null <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS attempts, done, reported;
DROP SEQUENCE IF EXISTS loader_tags;
CREATE SEQUENCE loader_tags;
CREATE TABLE attempts (tag bigint, part int, id bigint);
CREATE TABLE done (tag bigint, part int, PRIMARY KEY (tag, part));
CREATE TABLE reported (id bigint PRIMARY KEY);
SELECT cpht_create(1000, '$kind', name => '$tname');
SQL
	echo "== loaders ($kind): $clients sessions x $CPHT_LOADERS_TXNS transactions over $universe ids"
	# Crossed batches deadlock now and then (40P01): pgbench runs such a
	# transaction again, as an application would.
	if ! "$pgbench" -n -f "$script" -c "$clients" -j "$clients" -t "$CPHT_LOADERS_TXNS" \
		--max-tries=1000 -D universe="$universe" -D tname="$tname" "$db" > /tmp/cpht_loaders.$$ 2>&1; then
		cat /tmp/cpht_loaders.$$
		echo "== FAILED: pgbench reported errors"
		failed=1
	fi
	grep -E "^number of (transactions actually processed|failed transactions|transactions retried)" /tmp/cpht_loaders.$$ || true
	rm -f /tmp/cpht_loaders.$$
	result=$(psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" <<SQL
WITH committed AS (
	SELECT DISTINCT a.id FROM attempts a JOIN done d USING (tag, part)
), rolled_back_only AS (
	SELECT id FROM attempts EXCEPT SELECT id FROM committed
)
SELECT concat_ws(' ',
	(SELECT count(*) FROM committed) || ' committed ids',
	(SELECT count(*) FROM rolled_back_only) || ' ids only in rolled-back batches',
	CASE WHEN EXISTS (SELECT id FROM committed EXCEPT SELECT id FROM reported)
		THEN 'FAIL: a committed id was never reported new' END,
	CASE WHEN EXISTS (SELECT id FROM reported EXCEPT SELECT id FROM committed)
		THEN 'FAIL: an id was reported new by no committed batch' END,
	CASE WHEN cpht_count(cpht_open('$tname')) <> (SELECT count(*) FROM reported)
		THEN 'FAIL: cpht_count ' || cpht_count(cpht_open('$tname')) || ' is not the number of reported ids' END,
	CASE WHEN false = ANY (cpht_find(cpht_open('$tname'), ARRAY(SELECT id FROM reported)))
		THEN 'FAIL: a reported id is not found' END,
	CASE WHEN true = ANY (cpht_find(cpht_open('$tname'), ARRAY(SELECT id FROM rolled_back_only)))
		THEN 'FAIL: an id only rolled-back batches had is in the table' END,
	CASE WHEN (SELECT count(*) FROM rolled_back_only) = 0 THEN 'FAIL: nothing rolled back' END,
	(cpht_info(cpht_open('$tname'))->>'grows') || ' growths',
	CASE WHEN (cpht_info(cpht_open('$tname'))->>'grows')::int = 0 THEN 'FAIL: the table never grew' END);
SELECT cpht_drop(cpht_open('$tname'));
DROP TABLE attempts, done, reported;
DROP SEQUENCE loader_tags;
SQL
)
	echo "== loaders ($kind): ${result%%$'\n'*}"
	if grep -q FAIL <<<"$result"; then
		failed=1
	fi
done
exit $failed
