# A standby made from a base backup whose files keep changes of a
# transaction still open (or hold a .pending table) waits for that
# transaction before it restores the tables; its worker makes the
# cpht_durable slot first, so that the restartpoints meanwhile keep the WAL
# after the backup's start (EXACT records) that the restore needs, and no
# table is lost once the transaction ends.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $primary = cpht_node('primary', "max_wal_size = 8MB\nmin_wal_size = 2MB\n", '--wal-segsize=1');
$primary->safe_psql('postgres', q{
	CREATE TABLE filler (x bigint, pad text);
	SELECT cpht_create(10000, key_bits => 40, name => 'txn', durable => true, transactional => true);
	SELECT cpht_put(cpht_open('txn'), ARRAY[1, 2, 3]);
});
my $open = $primary->background_psql('postgres');
$open->query_safe('BEGIN');
$open->query_safe("SELECT cpht_put(cpht_open('txn'), ARRAY[10, 11, 12])");
my $creator = $primary->background_psql('postgres');
$creator->query_safe('BEGIN');
$creator->query_safe("SELECT cpht_create(1000, key_bits => 40, name => 'slow', durable => true)");
$creator->query_safe("SELECT cpht_put(cpht_open('slow'), ARRAY[11, 12, 13, 14])");
$primary->safe_psql('postgres', 'SELECT cpht_checkpoint()');
$primary->backup('b');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', "cpht.snapshot_interval = 1\nmax_wal_size = 8MB\nmin_wal_size = 2MB\n");
$standby->start;
ok($standby->wait_for_log(qr/waits for transaction \d+ to end/), 'the standby waits for the open transaction');
my $slots = $standby->safe_psql('postgres', "SELECT count(*) FROM pg_replication_slots");
note("slots on the standby while it waits: $slots");

for my $i (1 .. (4))
{
	$primary->safe_psql('postgres', q{
		INSERT INTO filler SELECT g, repeat('x', 200) FROM generate_series(1, 8000) g;
		DELETE FROM filler;
		SELECT pg_switch_wal();
		CHECKPOINT;
	});
	$primary->wait_for_catchup($standby);
	$standby->safe_psql('postgres', 'CHECKPOINT');
}
$open->query_safe('COMMIT');
$creator->query_safe('COMMIT');
$open->quit;
$creator->quit;
$primary->wait_for_catchup($standby);
cpht_wait_worker($standby);
ok(!$standby->log_contains('could not restore durable shared table'),
	'the standby lost no durable table while it waited');
$primary->stop('immediate');
$standby->promote;
cpht_wait_worker($standby);
is(cpht_contents($standby, 'txn', 1, 3, '10, 11, 12'), '6 0 3', 'txn back after promotion');
is(cpht_contents($standby, 'slow', 11, 14, '10'), '4 0 0', 'slow back after promotion');
$standby->stop;
done_testing();
