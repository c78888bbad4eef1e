# Durable tables and memory limits at start: a table larger than the
# server's cpht.max_memory is not restored (the server starts, opening it
# fails naming it and the setting, a WARNING names it, its file stays, and
# so does the WAL after its snapshot while WAL moves on and checkpoints
# remove segments); raising the limit and restarting brings it back.  A
# durable table keeps its owner's memory cap (the cpht.max_memory of the
# creating session) across a restart.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('memory', "cpht.snapshot_interval = 0\n");
my $db = 'postgres';
my ($rc, $out, $err);

# ---- a table above cpht.max_memory at start ---------------------------------------
# d_a and d_b move on with WAL while d_big waits
$node->safe_psql($db, q{
	SELECT cpht_create(1000, name => 'd_a', durable => true);
	SELECT cpht_create(1000, 'cuckoo', name => 'd_b', durable => true);
	SELECT cpht_create(1000000, name => 'd_big', durable => true);
	SELECT cpht_put(cpht_open('d_big'), ARRAY(SELECT generate_series(1, 5000)::bigint));
});
my $big_kb = $node->safe_psql($db, "SELECT (cpht_info(cpht_open('d_big'))->>'bytes')::bigint / 1024");
$node->safe_psql($db, "ALTER SYSTEM SET cpht.max_memory = '" . int($big_kb / 2) . "kB'");
my $log_at = -s $node->logfile;
$node->restart;
ok(cpht_wait_open($node, $db, 'd_a'), 'd_a is back after a start with a table above cpht.max_memory');
my $big = cpht_snap_file($node, 'd_big');
($rc, $out, $err) = $node->psql($db, "SELECT cpht_open('d_big')");
like($err, qr/shared cpht table "d_big" was lost.*cpht\.max_memory/s,
	'opening a table above cpht.max_memory at start fails naming it and the setting');
ok(defined $big && -f $big, 'the snapshot of a table above cpht.max_memory is left in place');
ok(eval { $node->wait_for_log(qr/could not restore durable shared table "d_big"/, $log_at) },
	'a WARNING in the server log names d_big');

# WAL moves on while the table waits: the other tables' snapshots (and the
# replication slot with them) pass its snapshot into later WAL segments,
# and checkpoints remove older ones; the WAL after its snapshot must stay
for my $key (1, 8)
{
	$node->safe_psql($db, q{
		CREATE TABLE wal_filler AS SELECT generate_series(1, 50000) g;
		DROP TABLE wal_filler;
		SELECT pg_switch_wal();
	});
	$node->safe_psql($db, qq{
		SELECT cpht_put(cpht_open('d_a'), '{$key}');
		SELECT cpht_put(cpht_open('d_b'), '{$key}');
		SELECT cpht_checkpoint();
		CHECKPOINT;
	});
}
$node->safe_psql($db, 'ALTER SYSTEM RESET cpht.max_memory');
$node->restart;
ok(cpht_wait_open($node, $db, 'd_big'),
	'd_big is back after cpht.max_memory was raised and the server restarted');
is($node->safe_psql($db, q{SELECT cpht_count(cpht_open('d_big')) || ' ' ||
		(SELECT count(*) FROM unnest(cpht_find(cpht_open('d_big'),
			ARRAY(SELECT generate_series(1, 5001)::bigint))) f WHERE f)}),
	'5000 5000', 'd_big has its 5000 keys after its restore (count, keys found)');
$node->safe_psql($db, "SELECT cpht_drop(cpht_open('d_big'))");

# ---- a durable table keeps its memory cap -------------------------------------------
# The cpht.max_memory of the creating session caps its owner's shared
# tables; the snapshot keeps it, so the restored table is capped as
# before: a superuser's put of 4M keys (9.2MB of slots) meets the 8MB cap.
$node->safe_psql($db, q{
	CREATE ROLE durable_owner LOGIN;
	GRANT ALL ON SCHEMA public TO durable_owner;
	GRANT CREATE ON DATABASE postgres TO durable_owner;
	SET cpht.max_memory = '8MB';
	SET ROLE durable_owner;
	SELECT cpht_create(1000, transactional => false, name => 'd_capped', durable => true);
});
$node->restart;
ok(cpht_wait_open($node, $db, 'd_capped'), 'd_capped is back after a clean restart');
($rc, $out, $err) = $node->psql($db,
	"SELECT cpht_put(cpht_open('d_capped'), ARRAY(SELECT generate_series(1, 4000000)::bigint))");
like($err, qr/would exceed its owner's memory cap/, 'd_capped keeps its memory cap across a restart');
is($node->safe_psql($db, "SELECT cpht_count(cpht_open('d_capped'))"), '0',
	'd_capped keeps no key of a refused put');

$node->stop;
done_testing();
