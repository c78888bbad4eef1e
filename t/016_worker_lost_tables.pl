# The cpht worker, stopped by a SIGTERM while the server runs, is started
# again by the postmaster; the tables it held that are not durable are
# reported lost: a shared table by its name (created again under that name
# by a session that never opened it, it works), a private table in the
# worker by its handle (listed with no count, and dropped); a lost shared
# table dropped by a session that holds its handle frees its name.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('lost');
my $db = 'postgres';
my ($rc, $out, $err);

$node->safe_psql($db, "SELECT cpht_create(1000, transactional => false, name => 'restart_check')");
my $old = cpht_worker_pid($node);
my $new = eval { cpht_restart_worker($node) };
ok(defined $new && $new ne '' && $new ne $old, "a new cpht worker serves after a SIGTERM ($old -> " . ($new // 'none') . ')');
($rc, $out, $err) = $node->psql($db, "SELECT cpht_open('restart_check')");
like($err, qr/was lost/, 'the shared table the stopped worker held is reported lost');

# a lost shared table is created again under its name, by a session that
# never opened it, and then works
is($node->safe_psql($db, q{
	SELECT cpht_create(1000, transactional => false, name => 'restart_check') > 0;
	SELECT 'put ' || cpht_put(cpht_open('restart_check'), '{1,2,3}');
	SELECT 'listed ' || count(*) FROM cpht_tables() WHERE name = 'restart_check';
}), "t\nput 3\nlisted 1", 'a lost shared table is created again under its name and works');

# a private table in the worker, used by its session after the worker that
# held it was stopped: lost, named by its handle
my $s = $node->background_psql($db, on_error_stop => 0);
$s->query_safe('SET cpht.placement = worker');
my $h = $s->query_safe('SELECT cpht_create(1000)');
my $sh = $s->query_safe("SELECT cpht_create(1000, name => 'restart_drop')");
cpht_restart_worker($node);

# the error of statement $sql in session $s, cleared afterwards
sub error_of
{
	my ($sql) = @_;
	$s->query($sql);
	my $e = $s->{stderr};
	$s->{stderr} = '';
	return $e;
}
like(error_of("SELECT cpht_count($h)"), qr/cpht table $h was lost/,
	'a private table of the stopped worker is reported lost by its handle');
is($s->query_safe("SELECT 'listed, count null: ' || bool_and(count IS NULL) FROM cpht_tables() WHERE handle = $h"),
	'listed, count null: true', 'the lost private table is listed with no count');
is(error_of("SELECT cpht_drop($h)"), '', 'the lost private table can be dropped');
# a lost shared table dropped by a session that holds its handle: its name is free
like(error_of("SELECT cpht_open('restart_drop')"), qr/shared cpht table "restart_drop" was lost/,
	'the shared table of the stopped worker is reported lost by its name');
is(error_of("SELECT cpht_drop($sh)"), '', 'the lost shared table is dropped by a session that holds its handle');
like(error_of("SELECT cpht_open('restart_drop')"), qr/shared cpht table "restart_drop" does not exist/,
	'the dropped lost shared table no longer exists');
is($s->query_safe("SELECT 'created again ' || (cpht_create(1000, name => 'restart_drop') > 0)"),
	'created again true', 'its name is free again');
is($s->query_safe("SELECT 'count ' || cpht_count(cpht_open('restart_drop'))"), 'count 0',
	'the table created again under that name is empty');
$s->quit;

$node->stop;
done_testing();
