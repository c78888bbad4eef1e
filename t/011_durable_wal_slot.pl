# An idle durable table does not hold WAL back: snapshot rounds move the
# cpht_durable slot's restart_lsn past it and old segments go; a slot
# dropped by hand loses no current table at a clean restart, and is made
# again.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('walslot', "cpht.snapshot_interval = 0\n");
my $db = 'postgres';
my $slot_count = "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cpht_durable'";

$node->safe_psql($db, q{
	SELECT cpht_create(1000, name => 'd_other', durable => true);
	SELECT cpht_put(cpht_open('d_other'), array_agg(g)) FROM generate_series(1, 30000) g;
	SELECT cpht_create(1000, name => 'd_idle', durable => true);
	SELECT cpht_put(cpht_open('d_idle'), '{1,2,3}');
	SELECT cpht_checkpoint();
});
is($node->safe_psql($db, $slot_count), '1', 'a cpht_durable slot exists while durable tables do');
my $idle_lsn = $node->safe_psql($db, 'SELECT pg_current_wal_insert_lsn()');
for (1 .. 5)
{
	$node->safe_psql($db, q{
		SELECT pg_switch_wal();
		CREATE TABLE wal_filler AS SELECT generate_series(1, 20000) g;
		DROP TABLE wal_filler;
		CHECKPOINT;
		SELECT cpht_checkpoint();
		CHECKPOINT;
	});
}
is($node->safe_psql($db, qq{
	SELECT restart_lsn > '$idle_lsn'::pg_lsn, pg_wal_lsn_diff(pg_current_wal_insert_lsn(), restart_lsn) < 3 * 16777216
	FROM pg_replication_slots WHERE slot_name = 'cpht_durable'}),
	't|t', "the slot's restart_lsn follows WAL past an idle table (moved, close to the insert position)");
is($node->safe_psql($db, qq{
	SELECT min(name) > pg_walfile_name('$idle_lsn') FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}\$'}),
	't', "pg_wal no longer holds the segment of an idle table's snapshot");

# a slot dropped by hand: old WAL goes, and a clean restart still brings
# every current table back
$node->safe_psql($db, "SELECT pg_drop_replication_slot('cpht_durable')");
for (1 .. 3)
{
	$node->safe_psql($db, q{
		SELECT pg_switch_wal();
		CREATE TABLE wal_filler AS SELECT generate_series(1, 20000) g;
		DROP TABLE wal_filler;
		CHECKPOINT;
	});
}
my $other_count = $node->safe_psql($db, "SELECT cpht_count(cpht_open('d_other'))");
$node->restart;
ok(cpht_wait_open($node, $db, 'd_idle'), 'd_idle is back after a clean restart without its slot');
is($node->safe_psql($db, "SELECT cpht_find(cpht_open('d_idle'), '{1,2,3,4}')::text || ' ' || cpht_count(cpht_open('d_other'))"),
	"{t,t,t,f} $other_count", 'every table has its keys after a clean restart without their slot');
is($node->safe_psql($db, $slot_count), '1', 'the cpht_durable slot is made again');

$node->stop;
done_testing();
