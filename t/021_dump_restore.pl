# pg_dump and pg_restore of a database with shared tables: the definitions
# in cpht_shared_tables are dumped, and a restore (pg_restore into another
# database of the cluster, and a plain SQL dump into another cluster)
# creates each table again as it was defined (kind, key width,
# transactional, durable, owner), without keys; a creation rolled back and
# a table dropped are not carried; a durable table restored is durable
# (it survives a restart of the cluster it was restored into), and the
# others, gone with that restart, come back from their rows with
# cpht_catalog_sync().
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('dump');
$node->safe_psql('postgres', q{
	CREATE ROLE cpht_app;
	GRANT CREATE ON DATABASE postgres TO cpht_app;
	SELECT cpht_create(1000, key_bits => 40, name => 'd_plain');
	SELECT cpht_create(2000, 'cuckoo', 48, false, name => 'd_cuckoo');
	SELECT cpht_create(3000, name => 'd_dur', durable => true);
	SELECT cpht_create(4000, name => 'd_owned');
	SELECT cpht_alter_owner('d_owned', 'cpht_app');
	SELECT cpht_create(1000, name => 'd_dropped');
	SELECT cpht_drop('d_dropped');
	BEGIN;
	SELECT cpht_create(1000, name => 'd_rolled_back');
	ROLLBACK;
	SELECT cpht_put('d_plain', '{1,2,3}');
	SELECT cpht_put('d_dur', '{4,5}');
});

# The definitions as cpht_tables() and cpht_info() show them.
my $defs = q{
	SELECT string_agg(format('%s %s %s %s %s %s', t.name, t.kind, coalesce(t.key_bits::text, 'auto'),
		t.owner, s.transactional, s.durable), E'\n' ORDER BY t.name)
	FROM cpht_tables() t JOIN cpht_stat_tables() s USING (name)
	WHERE t.shared};
my $before = $node->safe_psql('postgres', $defs);
note("before:\n$before");
like($before, qr/d_dur iceberg auto \S+ t t/, 'the durable table is listed as durable');

my $dir = $node->basedir;
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$dir/db.dump", '-d', $node->connstr('postgres') ],
	'pg_dump of a database with shared tables');
$node->command_ok([ 'pg_dump', '-f', "$dir/db.sql", '-d', $node->connstr('postgres') ],
	'pg_dump as SQL');
my $sql = slurp_file("$dir/db.sql");
like($sql, qr/COPY public\.cpht_shared_tables/, 'the dump holds the rows of cpht_shared_tables');
unlike($sql, qr/d_dropped|d_rolled_back/, 'and neither the dropped table nor the one rolled back');

# (a) pg_restore into another database of the same cluster
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('restored'), "$dir/db.dump" ],
	'pg_restore into another database');
is($node->safe_psql('restored', $defs), $before,
	'the restored database has every shared table, defined as before');
is($node->safe_psql('restored', q{SELECT cpht_count('d_plain') + cpht_count('d_dur')}), '0',
	'without their keys');
is($node->safe_psql('postgres', q{SELECT cpht_count('d_plain')}), '3',
	'and the source database keeps its own tables and keys');

# (b) the SQL dump into another cluster
my $other = cpht_node('other');
$other->safe_psql('postgres', 'CREATE ROLE cpht_app');
$other->safe_psql('postgres', 'CREATE DATABASE target');
my ($rc, $out, $err) = $other->psql('target', $sql, on_error_stop => 1);
is($rc, 0, 'the SQL dump restores into another cluster');
note($err) if $rc != 0;
is($other->safe_psql('target', $defs), $before,
	'the other cluster has every shared table, defined as before');
$other->safe_psql('target', q{SELECT cpht_put('d_dur', '{7,8,9}')});
$other->restart;
cpht_wait_worker($other);
is($other->safe_psql('target', q{SELECT cpht_count('d_dur')}), '3',
	'the restored durable table is durable: its keys survive a restart');
# the tables that are not durable are gone with the restart, their rows
# stay (as an unlogged table's definition does), and come back
is($other->safe_psql('target', q{SELECT count(*) FROM cpht_tables() WHERE shared}), '1',
	'after the restart only the durable table is held');
is($other->safe_psql('target', q{SELECT cpht_catalog_sync()}), '3',
	'cpht_catalog_sync() creates the three tables whose rows stayed');
is($other->safe_psql('target', $defs), $before, 'every table is back, defined as before');

$other->stop;
$node->stop;
done_testing();
