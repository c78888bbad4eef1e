# The standby's replay of a DROP record removes the table's file only once
# pg_cpht/catalog no longer names it, as the primary does: a round that
# fails after the replay (here a file it cannot write; a crash or a full
# disk alike) leaves no catalog naming a missing file, so the restarted
# standby does not report the dropped table as lost, and after promotion
# its name is free.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $primary = cpht_node('primary');
$primary->safe_psql('postgres', q{
	SELECT cpht_create(10000, key_bits => 40, name => 'steady', durable => true);
	SELECT cpht_put(cpht_open('steady'), ARRAY[1, 2, 3]);
	SELECT cpht_create(10000, key_bits => 40, name => 'doomed', durable => true);
	SELECT cpht_put(cpht_open('doomed'), ARRAY[1, 2, 3]);
});
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', "cpht.snapshot_interval = 3600\n");
$standby->start;
cpht_wait_worker($standby);
my $steady = cpht_snap_file($standby, 'steady');
ok(defined $steady, "steady's file on the standby");
mkdir("$steady.tmp") or die "mkdir: $!";

$primary->safe_psql('postgres', q{
	SELECT cpht_put(cpht_open('steady'), ARRAY[4]);
	SELECT cpht_drop(cpht_open('doomed'));
});
$primary->wait_for_catchup($standby);
$standby->psql('postgres', 'SELECT cpht_checkpoint()');
rmdir("$steady.tmp");
$standby->restart;
cpht_wait_worker($standby);
ok(!$standby->log_contains('could not restore durable shared table "doomed"'),
	'the restarted standby does not report the dropped table as lost');
$primary->stop('immediate');
$standby->promote;
cpht_wait_worker($standby);
my ($rc, $out, $err) = $standby->psql('postgres', "SELECT cpht_open('doomed')");
like($err, qr/does not exist/, 'the dropped table does not exist after promotion');
is(cpht_contents($standby, 'steady', 1, 4, '5'), '4 0 0', 'steady after promotion');
$standby->stop;
done_testing();
