# What sessions see across a restart of the cpht worker alone (SIGTERM,
# the server goes on): right after the new worker started, cpht_tables()
# lists the durable table and a new durable table can be created (both
# wait for the restore); a handle opened before says that the worker
# restarted; cpht_open reaches the restored table.  While the restore
# waits for a transaction that holds changes of the durable table, the
# new worker serves what needs no durable table (a private table in the
# worker, created and counted); the transaction then commits and its key
# stays.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use CphtTest;

my $node = cpht_node('wsessions');
my $db = 'postgres';

$node->safe_psql($db, "SELECT cpht_create(1000, key_bits => 32, name => 'w_load', durable => true)");

# ---- a session across the restart -------------------------------------------------
my $s = $node->background_psql($db, on_error_stop => 0);
$s->query_safe("SELECT cpht_put(cpht_open('w_load'), '{1,2,3}')");
my $h = $s->query_safe("SELECT cpht_open('w_load')");
cpht_restart_worker($node);
is($s->query_safe("SELECT 'listed ' || count(*) FROM cpht_tables() WHERE name = 'w_load'"),
	'listed 1', 'right after the restart cpht_tables() lists the durable table');
is($s->query_safe("SELECT 'created ' || (cpht_create(1000, name => 'w_other', durable => true) > 0)"),
	'created true', 'right after the restart a new durable table can be created');
$s->query("SELECT cpht_count($h)");
like($s->{stderr}, qr/cpht table $h was opened before the cpht worker restarted/,
	'a handle opened before the restart says that the worker restarted');
$s->{stderr} = '';
is($s->query_safe("SELECT 'reopened ' || cpht_count(cpht_open('w_load'))"),
	'reopened 3', 'cpht_open reaches the restored table');
$s->query_safe("SELECT cpht_drop(cpht_open('w_other')); SELECT cpht_delete(cpht_open('w_load'), '{1,2,3}')");
$s->quit;

# ---- the restore waits for an open transaction -----------------------------------
my $holder = $node->background_psql($db);
$holder->query_safe('BEGIN');
is($holder->query_safe("SELECT cpht_fop_new(cpht_open('w_load'), '{900001}')"), '{900001}',
	'an open transaction puts a key in the durable table');
cpht_restart_worker($node);
my $t0 = time();
my ($rc, $out, $err) = $node->psql($db, q{
	SET cpht.placement = worker;
	SET statement_timeout = '2s';
	SELECT 'private ' || cpht_count(cpht_create(1000));
});
is($out, 'private 0',
	'while the restore waits for an open transaction, a private table in the worker is created and counted');
note(sprintf('served in %.3f s', time() - $t0));
is($node->safe_psql($db, 'SELECT count(*) FROM pg_stat_activity WHERE state LIKE \'idle in transaction%\''),
	'1', 'the transaction the restore waits for is still open meanwhile');
$holder->query_safe('COMMIT');
$holder->quit;
is($node->safe_psql($db, "SELECT cpht_find(cpht_open('w_load'), '{900001}')::text"), '{t}',
	'the key of the transaction the restore waited for is kept after its commit');

$node->stop;
done_testing();
