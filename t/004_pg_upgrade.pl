# pg_upgrade and durable tables: pg_upgrade copies relation files and the
# commit log, not pg_cpht/ nor the WAL its snapshots need, so a cluster
# with durable tables refuses to be upgraded, naming them and saying what
# to do, and is left as it was; once they are dropped (their keys copied
# out), the upgrade runs and the upgraded cluster serves cpht.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use File::Path qw(rmtree);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $old = cpht_node('old');
$old->safe_psql('postgres', q{
	SELECT cpht_create(10000, key_bits => 40, name => 'kept', durable => true);
	SELECT cpht_put(cpht_open('kept'), array_agg(g)) FROM generate_series(1, 500) g;
	CREATE TABLE kept_keys AS SELECT g AS id FROM generate_series(1, 500) g;
});
$old->stop;

my $bindir = $old->config_data('--bindir');

# A new cluster made as pg_upgrade wants it (same initdb settings), with
# cpht preloaded as on the old one.
sub new_cluster
{
	my ($name) = @_;
	my $new = PostgreSQL::Test::Cluster->new($name);
	$new->init(allows_streaming => 1);
	$new->append_conf('postgresql.conf', q{
shared_preload_libraries = 'cpht'
cpht.transfer_windows = 2
cpht.transfer_chunk = 65536
} . 'cpht.device = ' . cpht_device() . "\n");
	return $new;
}

sub upgrade
{
	my ($new) = @_;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[
			"$bindir/pg_upgrade", '--no-sync',
			'-b', $bindir, '-B', $bindir,
			'-d', $old->data_dir, '-D', $new->data_dir,
			'-s', $new->host, '-p', $old->port, '-P', $new->port
		],
		'>', \$stdout, '2>', \$stderr);
	return ($ok, $stdout . $stderr);
}

# pg_upgrade writes its logs under the new data directory
sub upgrade_logs
{
	my ($new) = @_;
	my $text = '';
	for my $f (glob($new->data_dir . '/pg_upgrade_output.d/*/log/*.log'))
	{
		$text .= slurp_file($f);
	}
	return $text;
}

# (a) with a durable table: refused, the old cluster unchanged
my $new = new_cluster('new1');
my ($ok, $out) = upgrade($new);
ok(!$ok, 'pg_upgrade of a cluster with a durable table fails');
like(upgrade_logs($new),
	qr/cpht durable tables cannot be carried by pg_upgrade.*\n.*1 durable cpht table: "kept"/,
	'the old server says why, naming the table');
like(upgrade_logs($new), qr/HINT:.*cpht_drop/, 'and what to do');

$old->start;
cpht_wait_worker($old);
is($old->safe_psql('postgres',
		"SELECT cpht_count(cpht_open('kept')) || ' ' || cpht_find(cpht_open('kept'), '{1, 500, 501}')::text"),
	'500 {t,t,f}', 'the old cluster still has its durable table, exactly');

# (b) its keys copied out (kept_keys), the table dropped: the upgrade runs
$old->safe_psql('postgres', "SELECT cpht_drop(cpht_open('kept'))");
$old->stop;
$new = new_cluster('new2');
($ok, $out) = upgrade($new);
ok($ok, 'pg_upgrade runs once no durable table is left') or diag($out . upgrade_logs($new));

$new->start;
cpht_wait_worker($new);
is($new->safe_psql('postgres', q{
		SELECT cpht_create(10000, key_bits => 40, name => 'kept', durable => true) > 0;
		SELECT cpht_put(cpht_open('kept'), array_agg(id)) FROM kept_keys;
		SELECT cpht_count(cpht_open('kept'))}),
	"t\n500\n500", 'the upgraded cluster has cpht; the table is made again from its keys');
$new->restart;
cpht_wait_worker($new);
ok(cpht_wait_open($new, 'postgres', 'kept'), 'the table is back after a restart of the upgraded cluster');
is($new->safe_psql('postgres', "SELECT cpht_count(cpht_open('kept'))"), '500',
	'with its keys');
$new->stop;

done_testing();
