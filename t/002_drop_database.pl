# Shared tables belong to their database and to the cpht extension in it:
# DROP DATABASE (WITH (FORCE) too) and a committed DROP EXTENSION cpht drop
# them, durable ones for good (no snapshot file left, not back after a
# restart or a crash); a DROP EXTENSION that rolls back keeps them; tables
# whose database was dropped while no cpht worker ran (a plain server
# here) are dropped when a worker starts, with a LOG line naming them.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('dropdb');

# Live shared tables of all databases (cpht_worker_info), and snapshot files.
sub live_tables
{
	return $node->safe_psql('postgres',
		"SELECT cpht_worker_info()->>'shared_tables'");
}
sub nfiles { return scalar(cpht_snap_files($node)); }

# Database $db with the extension, a durable table "<prefix>_d" of 1000
# keys and a shared one "<prefix>_s" that is not durable.
sub make_db_tables
{
	my ($db, $prefix) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, qq{
		CREATE EXTENSION cpht;
		SELECT cpht_create(10000, key_bits => 40, name => '${prefix}_d', durable => true);
		SELECT cpht_put(cpht_open('${prefix}_d'), array_agg(g)) FROM generate_series(1, 1000) g;
		SELECT cpht_create(1000, transactional => false, name => '${prefix}_s');
	});
	return;
}

# A table in postgres that every step must leave alone.
$node->safe_psql('postgres', q{
	SELECT cpht_create(1000, key_bits => 40, name => 'bystander', durable => true);
	SELECT cpht_put(cpht_open('bystander'), ARRAY[7, 8, 9]);
});
sub bystander_ok
{
	my ($when) = @_;
	is($node->safe_psql('postgres', "SELECT cpht_count(cpht_open('bystander'))"),
		'3', "the durable table of another database stays ($when)");
}

# --- DROP DATABASE -----------------------------------------------------------
make_db_tables('gone', 'g');
is(live_tables(), '3', 'three live shared tables before DROP DATABASE');
is(nfiles(), 2, 'two snapshot files before DROP DATABASE');

$node->safe_psql('postgres', 'DROP DATABASE gone');
is(live_tables(), '1', 'DROP DATABASE drops the shared tables of the database');
is(nfiles(), 1, 'DROP DATABASE removes the snapshot file of its durable table');

$node->restart;
cpht_wait_worker($node);
is(live_tables(), '1', 'the tables of the dropped database are not back after a restart');
is(nfiles(), 1, 'and their snapshot file neither');

# DROP DATABASE, then a crash at once: the drop is in WAL
make_db_tables('gone2', 'g2');
is(live_tables(), '3', 'three live shared tables before the second DROP DATABASE');
$node->safe_psql('postgres', 'DROP DATABASE gone2');
my $pid = $node->safe_psql('postgres', "SELECT cpht_worker_info()->>'worker_pid'");
kill 'KILL', $pid;
$node->poll_query_until('postgres',
	"SELECT cpht_worker_info()->>'worker_pid' IS NOT NULL AND cpht_worker_info()->>'worker_pid' <> '$pid'")
  or die 'no cpht worker after the crash restart';
cpht_wait_worker($node);
is(live_tables(), '1', 'the tables of a database dropped right before a crash are not back');
is(nfiles(), 1, 'nor is the snapshot file');
bystander_ok('after DROP DATABASE and a crash');

# WITH (FORCE), while a session of the database is in a transaction that
# wrote to its table
make_db_tables('forced', 'f');
my $session = $node->background_psql('forced');
$session->query_safe("BEGIN; SELECT cpht_put(cpht_open('f_d'), ARRAY[5001, 5002]);");
$node->safe_psql('postgres', 'DROP DATABASE forced WITH (FORCE)');
eval { $session->quit; };
is(live_tables(), '1', 'DROP DATABASE WITH (FORCE) drops the tables of the database');
is(nfiles(), 1, 'and the snapshot file');

# --- DROP EXTENSION ----------------------------------------------------------
make_db_tables('ext', 'e');
$node->safe_psql('ext', 'BEGIN; DROP EXTENSION cpht; ROLLBACK;');
is(live_tables(), '3', 'a DROP EXTENSION that rolls back keeps the tables');
$node->safe_psql('ext', q{
	BEGIN;
	SAVEPOINT s;
	DROP EXTENSION cpht;
	ROLLBACK TO SAVEPOINT s;
	COMMIT;
});
is(live_tables(), '3', 'a DROP EXTENSION rolled back to a savepoint keeps the tables');
is($node->safe_psql('ext', "SELECT cpht_count(cpht_open('e_d'))"), '1000',
	'the kept durable table holds its keys');
is(nfiles(), 2, 'and its snapshot file stays');

$node->safe_psql('ext', 'BEGIN; DROP EXTENSION cpht; COMMIT;');
is(live_tables(), '1', 'a committed DROP EXTENSION cpht drops the tables of its database');
is(nfiles(), 1, 'and the snapshot file of the durable one');
$pid = $node->safe_psql('postgres', "SELECT cpht_worker_info()->>'worker_pid'");
kill 'KILL', $pid;
$node->poll_query_until('postgres',
	"SELECT cpht_worker_info()->>'worker_pid' IS NOT NULL AND cpht_worker_info()->>'worker_pid' <> '$pid'")
  or die 'no cpht worker after the crash restart';
cpht_wait_worker($node);
$node->safe_psql('ext', 'CREATE EXTENSION cpht');
my ($rc, $out, $err) = $node->psql('ext', "SELECT cpht_open('e_d')");
like($err, qr/shared cpht table "e_d" does not exist/,
	'after a crash and CREATE EXTENSION the dropped durable table is not back');
is(live_tables(), '1', 'no table came back');
bystander_ok('after DROP EXTENSION and a crash');

# --- orphans: a database dropped while no cpht worker ran ---------------------
make_db_tables('orphaned', 'o');
$node->stop;
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$node->start;
$node->safe_psql('postgres', 'DROP DATABASE orphaned');
$node->stop;
is(nfiles(), 2, 'a plain server leaves the snapshot file of a dropped database');
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cpht'");
my $offset = -s $node->logfile;
$node->start;
cpht_wait_worker($node);
ok($node->log_contains(
		qr/cpht worker dropped shared table "o_d" of database \d+, which no longer exists/, $offset),
	'the worker drops the durable table of the dropped database at start and says so');
is(live_tables(), '1', 'only the table of the remaining database is live');
is(nfiles(), 1, 'the snapshot file of the dropped database is gone');

$offset = -s $node->logfile;
$node->restart;
cpht_wait_worker($node);
ok(!$node->log_contains(qr/which no longer exists/, $offset),
	'nothing is left to drop at the next start');
bystander_ok('at the end');

$node->stop;
done_testing();
