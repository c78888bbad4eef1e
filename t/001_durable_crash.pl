# A preloaded cluster of its own: the cpht worker, connected to no database,
# ignores a cancel sent to it; durable shared tables come back after a crash
# restart of the cluster (the cpht worker killed with SIGKILL) and after an
# immediate shutdown; a shared table that is not durable does not.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use CphtTest;

my $node = cpht_node('crash');

$node->safe_psql('postgres', q{
	SELECT cpht_create(10000, key_bits => 40, name => 'kept', durable => true);
	SELECT cpht_put(cpht_open('kept'), array_agg(g)) FROM generate_series(1, 5000) g;
	SELECT cpht_create(1000, transactional => false, name => 'gone');
});
is($node->safe_psql('postgres', "SELECT cpht_count(cpht_open('kept'))"),
	'5000', 'the durable table holds its keys');

# SIGKILL of the worker: the postmaster restarts the whole cluster
my $pid = $node->safe_psql('postgres', "SELECT cpht_worker_info()->>'worker_pid'");
ok($pid =~ /^\d+$/, 'a cpht worker runs');
is($node->safe_psql('postgres',
		"SELECT backend_type || ' ' || (datid IS NULL) FROM pg_stat_activity WHERE pid = $pid"),
	'cpht worker true', 'pg_stat_activity lists the worker, connected to no database');

# a cancel sent to the worker itself is ignored: it would end the worker
# and lose its tables
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
usleep(300_000);
is($node->safe_psql('postgres', "SELECT cpht_count(cpht_open('gone')) || ' ' || (cpht_worker_info()->>'worker_pid')"),
	"0 $pid", 'a cancel of the cpht worker leaves it and its tables alone');
kill 'KILL', $pid;
ok($node->poll_query_until('postgres',
		"SELECT cpht_worker_info()->>'worker_pid' IS NOT NULL AND cpht_worker_info()->>'worker_pid' <> '$pid'"),
	'a new cpht worker runs after the crash restart');
cpht_wait_worker($node);
ok($node->log_contains('all server processes terminated; reinitializing'),
	'the cluster restarted after the crash');
is($node->safe_psql('postgres', "SELECT cpht_count(cpht_open('kept'))"),
	'5000', 'the durable table is back after a crash restart');
my ($rc, $out, $err) = $node->psql('postgres', "SELECT cpht_open('gone')");
like($err, qr/shared cpht table "gone" does not exist/,
	'the table that was not durable is gone');

$node->safe_psql('postgres',
	"SELECT cpht_put(cpht_open('kept'), array_agg(g)) FROM generate_series(5001, 6000) g");
$node->stop('immediate');
$node->start;
cpht_wait_worker($node);
is($node->safe_psql('postgres', "SELECT cpht_count(cpht_open('kept'))"),
	'6000', 'the durable table is back after an immediate shutdown, with the keys put since');

$node->stop;
done_testing();
