# A durable table without key_bits keeps its automatic width and every
# other property (the whole cpht_info) across every kind of restart: a
# clean one, kill -9 of the postmaster, kill -9 of a backend (a crash
# restart of the cluster) and SIGTERM of the cpht worker alone; then it
# takes wider, negative and full 64-bit keys, which a worker restart
# replays from WAL.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('keywidth', "cpht.snapshot_interval = 0\n");
my $db = 'postgres';

$node->safe_psql($db, q{
	SELECT cpht_create(1000, name => 'd_auto', durable => true);
	SELECT cpht_put(cpht_open('d_auto'), ARRAY(SELECT generate_series(1, 100000)::bigint));
	SELECT cpht_checkpoint();
});
my $auto_info = q{SELECT key_bits IS NULL AS auto, cpht_info(cpht_open(name)) - 'handle' - 'device_free_bytes' - 'last_grow_at'
	- 'last_grow_ms' - 'staging_bytes' - 'undo_log_bytes' - 'last_widen_ms'
	FROM cpht_tables() WHERE name = 'd_auto'};
my $before = $node->safe_psql($db, $auto_info);
like($before, qr/^t\|.*"key_width": "auto"/, 'd_auto is of automatic width before the restarts');

my %restart = (
	'a clean restart' => sub { $node->restart; },
	'kill -9 of the postmaster' => sub { cpht_kill9_postmaster($node); },
	'kill -9 of a backend' => sub {
		my ($o, $e) = ('', '');
		my $sleeper = IPC::Run::start(
			[ $node->installed_command('psql'), '-X', '-d', $node->connstr($db),
			  '-c', 'SELECT pg_sleep(60)' ], '>', \$o, '2>', \$e);
		$node->poll_query_until($db,
			"SELECT count(*) > 0 FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'")
		  or die 'the sleeping session did not start';
		my $victim = $node->safe_psql($db,
			"SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)' LIMIT 1");
		cpht_kill9_backend($node, $victim);
		$sleeper->finish;
	},
	'SIGTERM of the cpht worker alone' => sub { cpht_restart_worker($node); },
);
for my $kind ('a clean restart', 'kill -9 of the postmaster', 'kill -9 of a backend',
	'SIGTERM of the cpht worker alone')
{
	$restart{$kind}->();
	ok(cpht_wait_open($node, $db, 'd_auto'), "d_auto is back after $kind");
	is($node->safe_psql($db, $auto_info), $before, "d_auto keeps every property across $kind");
}

# wider, negative and full 64-bit keys after the restarts, in WAL until a
# worker restart replays them
is($node->safe_psql($db, q{
	SELECT cpht_open('d_auto') AS h \gset
	SELECT cpht_find(:h, '{200000,-3,9223372036854775807}')::text || ' ' ||
		cpht_put(:h, '{200000,-3,9223372036854775807,-9223372036854775808,1099511627776}') || ' ' ||
		cpht_find(:h, '{200000,-3,9223372036854775807,-9223372036854775808,1099511627776,5,100001}')::text;
}), '{f,f,f} 5 {t,t,t,t,t,t,f}', 'd_auto takes wider, negative and 64-bit keys after the restarts (finds, puts, finds)');
cpht_restart_worker($node);
ok(cpht_wait_open($node, $db, 'd_auto'), 'd_auto is back after a worker restart with wide keys in WAL');
is($node->safe_psql($db, q{
	SELECT cpht_find(cpht_open('d_auto'), '{200000,-3,9223372036854775807,-9223372036854775808,1099511627776,5,100001}')::text
	|| ' ' || cpht_count(cpht_open('d_auto')) || ' ' || (SELECT key_bits IS NULL FROM cpht_tables() WHERE name = 'd_auto')
	|| ' ' || (cpht_info(cpht_open('d_auto'))->>'key_width') || ' ' || (cpht_info(cpht_open('d_auto'))->>'signed_keys')}),
	'{t,t,t,t,t,t,f} 100005 true auto true', 'd_auto after a replay of wide keys (finds, count, automatic width, signed keys)');
$node->safe_psql($db, "SELECT cpht_drop(cpht_open('d_auto'))");

$node->stop;
done_testing();
