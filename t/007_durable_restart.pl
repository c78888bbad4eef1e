# Durable shared tables across restarts of the whole server: a clean
# restart keeps the keys, count, layout (after growth), device, owner and
# privileges of durable tables of both kinds, and drops the shared table
# that is not durable; a snapshot round runs when the next WAL record
# would start a page; a new owner survives a crash (WAL) and a clean
# restart (snapshot); the replication slot that keeps WAL for durable
# tables, and their files, exist only while a durable table does.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('restart', "cpht.snapshot_interval = 0\n");
my $db = 'postgres';

$node->safe_psql($db, q{
	CREATE ROLE durable_owner LOGIN;
	CREATE ROLE durable_other LOGIN;
	GRANT ALL ON SCHEMA public TO durable_owner, durable_other;
	GRANT CREATE ON DATABASE postgres TO durable_owner;
});

my $slot_count = "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cpht_durable'";
is($node->safe_psql($db, $slot_count), '0',
	'no cpht_durable slot while no durable table exists');

my ($rc, $out, $err) = $node->psql($db, 'SELECT cpht_create(100, durable => true)');
like($err, qr/a durable cpht table needs a name/, 'durable => true needs a name');

# ---- a clean restart ----------------------------------------------------------
$node->safe_psql($db, q{
SET ROLE durable_owner;
SELECT cpht_create(1000, 'iceberg', name => 'd_iceberg', durable => true) AS a,
       cpht_create(1000, 'cuckoo', key_bits => 37, name => 'd_cuckoo', durable => true) AS b,
       cpht_create(1000, transactional => false, name => 'd_plain', durable => true) AS c \gset
SELECT cpht_put(:a, array_agg(g)), cpht_put(:b, array_agg(g)), cpht_put(:c, array_agg(g))
  FROM generate_series(1, 30000) g;
SELECT cpht_delete(:a, array_agg(g)), cpht_delete(:b, array_agg(g)), cpht_delete(:c, array_agg(g))
  FROM generate_series(1, 30000, 7) g;
SELECT cpht_create(1000, name => 'not_durable');
});
my $layout = q{SELECT name, count, owner, device,
	cpht_info(cpht_open(name)) - 'handle' - 'device_free_bytes' - 'last_grow_at' - 'last_grow_ms' - 'staging_bytes' - 'undo_log_bytes'
		- 'last_widen_ms'
	FROM cpht_tables() WHERE shared ORDER BY name};
my $before = $node->safe_psql($db, $layout);
is($node->safe_psql($db, "SELECT (cpht_info(cpht_open('d_iceberg'))->>'grows')::int > 0"),
	't', 'd_iceberg grew before the restart');
my $log_at = -s $node->logfile;
$node->restart;
ok(cpht_wait_open($node, $db, 'd_iceberg'), 'd_iceberg is back after a clean restart');
ok($node->log_contains(qr/cpht worker saved 3 durable shared tables/, $log_at),
	'the clean shutdown saved the snapshots of the three durable tables');
is($node->safe_psql($db, $layout), join("\n", grep { !/^not_durable\|/ } split /\n/, $before),
	'keys, count, layout, device and owner of durable tables survive a clean restart');
for my $t (qw(d_iceberg d_cuckoo d_plain))
{
	is($node->safe_psql($db, qq{SELECT count(*) FROM generate_series(1, 31000) g,
		unnest(cpht_find(cpht_open('$t'), ARRAY(SELECT generate_series(1, 31000))))
		WITH ORDINALITY f(found, i) WHERE i = g AND found <> (g <= 30000 AND (g - 1) % 7 <> 0)}),
		'0', "$t answers every key as before the clean restart");
}
($rc, $out, $err) = $node->psql($db, "SELECT cpht_open('not_durable')");
like($err, qr/shared cpht table "not_durable" does not exist/,
	'the shared table that was not durable is gone');
($rc, $out, $err) = $node->psql($db, "SET ROLE durable_other; SELECT cpht_open('d_iceberg')");
like($err, qr/permission denied for shared cpht table "d_iceberg"/,
	'another role may not open a restored table');
is($node->safe_psql($db, 'SELECT cpht_checkpoint()'), '0',
	'cpht_checkpoint writes no snapshot of unchanged tables');

# ---- a snapshot round when the next WAL record would start a page ---------------
# The position after that page's header is not written yet, and flushing up
# to it fails.  Logical messages move the insert position to just past a
# page header (each record's size is learnt from the last one), then the
# round runs; three pages, in case other WAL moved the position in between.
($rc, $out, $err) = $node->psql($db, q{
DO $$
DECLARE
	at_page int := 0;
	overhead int := 100;
	lsn pg_lsn;
	before pg_lsn;
	room int;
BEGIN
	FOR i IN 1..20000 LOOP
		lsn := pg_current_wal_insert_lsn();
		IF (lsn - '0/0'::pg_lsn) % 8192 = 24 THEN
			PERFORM cpht_checkpoint();
			at_page := at_page + 1;
			EXIT WHEN at_page = 3;
		END IF;
		room := 8192 - ((lsn - '0/0'::pg_lsn) % 8192)::int;
		before := pg_current_wal_insert_lsn();
		PERFORM pg_logical_emit_message(false, 'cpht', repeat('x', greatest(room - overhead, 1)));
		IF room - overhead >= 1 AND (pg_current_wal_insert_lsn() - before) < room THEN
			overhead := overhead - ((room - (pg_current_wal_insert_lsn() - before))::int);
		ELSIF room - overhead >= 1 THEN
			overhead := overhead + ((pg_current_wal_insert_lsn() - before) - room)::int;
		END IF;
		overhead := least(greatest(overhead, 40), 400);
	END LOOP;
	RAISE NOTICE 'snapshot rounds at a page start: %', at_page;
END $$;
});
like($err, qr/snapshot rounds at a page start: [1-3]/,
	'a snapshot round with the next WAL record at a page start');

# ---- a new owner across a crash and a clean restart ------------------------------
# The change is in WAL (replayed after a crash) and marks the table changed
# (the clean shutdown's round writes a file naming the new owner).
$node->safe_psql($db, q{
SELECT cpht_create(1000, name => 'd_owned', durable => true);
SELECT cpht_put(cpht_open('d_owned'), '{1,2,3}');
SELECT cpht_checkpoint();
SELECT cpht_alter_owner('d_owned', 'durable_other');
});
cpht_kill9_postmaster($node);
ok(cpht_wait_open($node, $db, 'd_owned'), 'd_owned is back after kill -9 of the postmaster');
is($node->safe_psql($db, "SELECT owner::text || ' ' || count FROM cpht_tables() WHERE name = 'd_owned'"),
	'durable_other 3', 'the new owner survives kill -9 of the postmaster (WAL)');
$node->safe_psql($db, "SELECT cpht_alter_owner('d_owned', 'durable_owner')");
$node->restart;
ok(cpht_wait_open($node, $db, 'd_owned'), 'd_owned is back after a clean restart');
is($node->safe_psql($db, "SELECT owner::text || ' ' || count FROM cpht_tables() WHERE name = 'd_owned'"),
	'durable_owner 3', 'the new owner survives a clean restart (snapshot)');
($rc, $out, $err) = $node->psql($db, "SET ROLE durable_other; SELECT cpht_open('d_owned')");
like($err, qr/permission denied for shared cpht table "d_owned"/,
	'the former owner may not open d_owned');

# ---- every durable table dropped: no file, no slot ------------------------------
is($node->safe_psql($db, $slot_count), '1', 'the cpht_durable slot exists while durable tables do');
$node->safe_psql($db, "SELECT cpht_drop(cpht_open(t)) FROM unnest('{d_iceberg,d_cuckoo,d_plain,d_owned}'::text[]) t");
is(scalar(cpht_snap_files($node)), 0, 'no snapshot file is left after every durable table was dropped');
is($node->safe_psql($db, $slot_count), '0', 'no cpht_durable slot is left after every durable table was dropped');

$node->stop;
done_testing();
