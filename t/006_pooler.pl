# Behind a transaction pooler (PgBouncer, pool_mode = transaction) the
# transactions of one client run on whichever server connection is free:
# a shared table's handle names the same table on every one of them, so a
# client that kept it reaches its table from another backend, and that
# backend, which never opened the table, reaches it by the number alone.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use CphtTest;

my $pgbouncer = (grep { -x $_ } ('/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'))[0];
plan skip_all => 'pgbouncer is not installed (test/install-deps.sh installs it)'
  unless $pgbouncer;

my $node = cpht_node('pooled');

# PgBouncer in transaction mode with two server connections, on a socket
# of its own.
my $dir = PostgreSQL::Test::Utils::tempdir_short();
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $user = $node->safe_psql('postgres', 'SELECT current_user');
open(my $fh, '>', "$dir/users.txt") or die;
print $fh qq{"$user" ""\n};
close($fh);
my $host = $node->host;
my $dbport = $node->port;
open($fh, '>', "$dir/pgbouncer.ini") or die;
print $fh qq{[databases]
postgres = host=$host port=$dbport dbname=postgres

[pgbouncer]
listen_addr =
listen_port = $port
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
default_pool_size = 2
max_client_conn = 20
ignore_startup_parameters = extra_float_digits,options
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
};
close($fh);
my $bouncer = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ],
	'>', "$dir/stdout", '2>', "$dir/stderr");

# One statement through the pooler; its output, or undef on failure (the
# error in $$err).
sub pooled
{
	my ($sql, $err) = @_;
	my ($out, $e) = ('', '');
	my $ok = IPC::Run::run(
		[ 'psql', '-X', '-At', '-h', $dir, '-p', $port, '-d', 'postgres', '-U', $user,
		  '-v', 'ON_ERROR_STOP=1', '-c', $sql ],
		'>', \$out, '2>', \$e);
	chomp $out;
	$$err = $e if $err;
	return $ok ? $out : undef;
}

my $up = 0;
for (1 .. 100)
{
	last if defined($up = pooled('SELECT 1')) && $up eq '1';
	usleep(100_000);
}
is($up, '1', 'PgBouncer runs in front of the server');

my $h = pooled("SELECT cpht_create(10000, name => 'pooled')");
ok(defined $h && $h >= 2**30, 'a shared table made through the pooler has a handle of the shared range');

# A client holds one server connection in an open transaction, so that
# every other transaction runs on the other one.
my ($in, $out, $err) = ('', '', '');
my $holder = IPC::Run::start(
	[ 'psql', '-X', '-At', '-h', $dir, '-p', $port, '-d', 'postgres', '-U', $user ],
	'<', \$in, '>', \$out, '2>', \$err);
$in .= "BEGIN;\nSELECT 'held ' || pg_backend_pid();\n";
IPC::Run::pump($holder) until $out =~ /held (\d+)/;
my $held_pid = $1;

my $put = pooled("SELECT pg_backend_pid() || ' ' || cpht_put($h, ARRAY[1, 2, 3]::bigint[])");
my ($other_pid, $n) = split(/ /, $put // '');
isnt($other_pid, $held_pid, 'the next transaction runs on the other server connection');
is($n, '3', 'it writes to the shared table by the handle the client kept');

# the held connection's backend: did it open the table? whichever it is,
# the number reaches the same table there
$in .= "SELECT 'count ' || cpht_count($h) || ' ' || cpht_find($h, ARRAY[1, 2, 3, 4]::bigint[])::text;\n";
IPC::Run::pump($holder) until $out =~ /count (\S+ \S+)/;
is($1, '3 {t,t,t,f}', 'the other backend reaches the same table by the number');
$in .= "COMMIT;\n\\q\n";
IPC::Run::finish($holder);

# a number that names no shared table fails, on any backend
my $e;
ok(!defined(pooled('SELECT cpht_count(' . ($h + 1000) . ')', \$e)), 'a number naming no shared table fails through the pooler');
like($e, qr/cpht table \d+ does not exist/, '... saying it does not exist');

# by name in each transaction, as docs/shared-tables.md advises
is(pooled("SELECT cpht_count(cpht_open('pooled'))"), '3', 'opening by name in a transaction works through the pooler');

# cpht_fop_agg over a whole table by name, planned as cpht_fop_relation
# (docs/names.md), on whichever server connection the pooler gives
$node->safe_psql('postgres', 'CREATE TABLE pool_src AS SELECT g::bigint AS id FROM generate_series(1, 20000) g');
like(pooled("EXPLAIN (COSTS OFF) SELECT cpht_fop_agg('pooled', id) FROM pool_src") // '',
	qr/cpht call/, 'through the pooler cpht_fop_agg by name over a whole table is planned as one call');
is(pooled("SELECT cpht_fop_agg('pooled', id) FROM pool_src"), '19997',
	'... which finds the new keys (1, 2 and 3 were there)');
is(pooled("SELECT cpht_fop_agg('pooled', id) FROM pool_src"), '0', '... and none the second time');

$bouncer->kill_kill;
$node->stop;
done_testing();
