#!/bin/bash
# The upgrade path: databases that installed cpht 0.1, 0.2 and 0.3 and used
# them (the update from 0.2 changes privileges: cpht_checkpoint and the file
# functions are no longer PUBLIC) are brought up with ALTER EXTENSION cpht
# UPDATE, and must then each be the same extension as
# a fresh CREATE EXTENSION cpht: the default version, and every member
# object with the same definition, volatility, parallel safety, strictness,
# costs, privileges and comment.  Then the catalog and API tests
# (test/pgtap/api.sql) run against the upgraded database.
#
# Run by test/run-tests.sh against its server (PGHOST/PGPORT/PGUSER); exits
# non-zero when anything differs or fails.
set -euo pipefail

cd "$(dirname "$0")/.."
UPGRADED=cpht_upgraded
UPGRADED_02=cpht_upgraded_02
UPGRADED_03=cpht_upgraded_03
FRESH=cpht_fresh

q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

default=$(sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" cpht.control)
for db in $UPGRADED $UPGRADED_02 $UPGRADED_03 $FRESH; do
	q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
done

# in_use VERSION DB: VERSION installed in DB and in use (a table with
# keys), updated in the same session; the table made before the update
# still answers through the new functions.
in_use() {
	local version=$1 db=$2 check want
	check=$(q -At -d "$db" <<SQL
CREATE EXTENSION cpht VERSION '$version';
SELECT cpht_create(1000) AS h \\gset
SELECT cpht_put(:h, '{1,2,3}') AS put_before;
ALTER EXTENSION cpht UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'cpht';
SELECT cpht_count(:h) || ' ' || cpht_fop(:h, '{3,4}')::text;
SQL
)
	want=$(printf '3\n%s\n3 {f,t}' "$default")
	if [ "$check" != "$want" ]; then
		echo "upgrade-check: FAILED: $version in use, then ALTER EXTENSION cpht UPDATE: got"
		echo "$check"
		echo "upgrade-check: want (put before, extversion, count and find-or-put after)"
		echo "$want"
		exit 1
	fi
}
in_use 0.1 $UPGRADED
in_use 0.3 $UPGRADED_03
# From 0.2, whose grants the update changes.
check=$(q -At -d $UPGRADED_02 <<'SQL'
CREATE EXTENSION cpht VERSION '0.2';
SELECT has_function_privilege('public', 'cpht_checkpoint()', 'EXECUTE');
SELECT cpht_create(1000) AS h \gset
SELECT cpht_put(:h, '{1,2,3}') AS put_before;
ALTER EXTENSION cpht UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'cpht';
SELECT cpht_count(:h) || ' ' || cpht_fop(:h, '{3,4}')::text;
SELECT has_function_privilege('public', 'cpht_checkpoint()', 'EXECUTE')::text || ' ' ||
	has_function_privilege('public', 'cpht_export_file(int, text)', 'EXECUTE') || ' ' ||
	has_function_privilege('public', 'cpht_import_file(int, text)', 'EXECUTE');
SQL
)
want=$(printf 't\n3\n%s\n3 {f,t}\nfalse false false' "$default")
if [ "$check" != "$want" ]; then
	echo "upgrade-check: FAILED: 0.2 in use, then ALTER EXTENSION cpht UPDATE: got"
	echo "$check"
	echo "upgrade-check: want (PUBLIC's EXECUTE on cpht_checkpoint, put before, extversion, count and find-or-put after, PUBLIC's EXECUTE on the checkpoint and file functions after)"
	echo "$want"
	exit 1
fi
q -d $FRESH -c "CREATE EXTENSION cpht"

# Every member of the extension, described by pg_depend, one line per fact.
# Functions by their full definition (CREATE FUNCTION text) and the catalog
# columns it does not show; the aggregate by pg_aggregate; any other member
# (none today) by its description, so a new kind of object is compared too.
members() {
	q -At -d "$1" <<'SQL'
WITH ext AS (SELECT oid, extversion, extrelocatable, extconfig FROM pg_extension WHERE extname = 'cpht'),
member AS (
	SELECT d.classid, d.objid, d.objsubid
	FROM pg_depend d, ext
	WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e')
SELECT 'extension: version ' || extversion || ', relocatable ' || extrelocatable || ', config ' || coalesce(extconfig::text, '-')
FROM ext
UNION ALL
SELECT format(E'%s\n  kind %s, volatility %s, parallel %s, strict %s, security definer %s, leakproof %s, cost %s, rows %s, acl %s, comment %s\n%s',
			  p.oid::regprocedure, p.prokind, p.provolatile, p.proparallel, p.proisstrict,
			  p.prosecdef, p.proleakproof, p.procost, p.prorows, coalesce(p.proacl::text, 'default'),
			  coalesce(quote_literal(obj_description(p.oid, 'pg_proc')), 'none'),
			  CASE WHEN p.prokind = 'a' THEN
				  (SELECT format('  aggregate transition %s, final %s, state %s, kind %s, final modify %s, initial %s',
								 a.aggtransfn::regprocedure, a.aggfinalfn::regprocedure, a.aggtranstype::regtype,
								 a.aggkind, a.aggfinalmodify, coalesce(a.agginitval, 'null'))
				   FROM pg_aggregate a WHERE a.aggfnoid = p.oid)
			  ELSE pg_get_functiondef(p.oid) END)
FROM member m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
UNION ALL
SELECT 'member: ' || pg_describe_object(m.classid, m.objid, m.objsubid)
FROM member m WHERE m.classid <> 'pg_proc'::regclass
ORDER BY 1;
SQL
}
upgraded_members=$(mktemp)
fresh_members=$(mktemp)
trap 'rm -f "$upgraded_members" "$fresh_members"' EXIT
members $FRESH > "$fresh_members"
for pair in "0.1:$UPGRADED" "0.2:$UPGRADED_02" "0.3:$UPGRADED_03"; do
	from=${pair%%:*}
	db=${pair#*:}
	members "$db" > "$upgraded_members"
	if ! diff -u --label "fresh CREATE EXTENSION cpht" --label "$from + ALTER EXTENSION cpht UPDATE" \
		"$fresh_members" "$upgraded_members"; then
		echo "upgrade-check: FAILED: the extension updated from $from differs from a fresh install (diff above)"
		exit 1
	fi
	echo "upgrade-check: $from updated to $default: $(grep -c '^[a-z_]*(' "$fresh_members") functions and aggregates the same as a fresh install"
done

# The catalog and API tests against the upgraded database.
q -d $UPGRADED -c "CREATE EXTENSION pgtap"
pg_prove -d $UPGRADED --failures test/pgtap/api.sql

for db in $UPGRADED $UPGRADED_02 $UPGRADED_03 $FRESH; do
	q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db"
done
