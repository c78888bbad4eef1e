# A passing problem at one start harms no durable table for good: after a
# crash, a start with cpht.max_shared_tables lowered below the number of
# durable tables restores those that fit and names the others; their
# snapshot files and the WAL after them are kept while that server runs,
# writes and makes WAL well past them, so that once the setting is raised
# again every table comes back with exactly its committed keys.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('passing', q{
max_wal_size = 32MB
min_wal_size = 32MB
cpht.snapshot_interval = 1
});

# three durable tables, each written after its last snapshot too, so that
# their WAL is needed at the next start
$node->safe_psql('postgres', q{
	SELECT cpht_create(10000, key_bits => 40, name => 't1', durable => true) > 0;
	SELECT cpht_create(10000, key_bits => 40, name => 't2', durable => true) > 0;
	SELECT cpht_create(10000, key_bits => 40, name => 't3', durable => true) > 0;
	SELECT cpht_put(cpht_open('t' || i), array_agg(g)) FROM generate_series(1, 3) i, generate_series(1, 1000) g GROUP BY i;
	SELECT cpht_checkpoint();
	SELECT cpht_put(cpht_open('t' || i), array_agg(g)) FROM generate_series(1, 3) i, generate_series(1001, 1500) g GROUP BY i;
});
$node->stop('immediate');

# one start with room for two shared tables only
$node->append_conf('postgresql.conf', 'cpht.max_shared_tables = 2');
my $log_at = -s $node->logfile;
$node->start;
cpht_wait_worker($node);
ok($node->wait_for_log(qr/could not restore durable shared table "t\d"\n.*DETAIL:  Every catalog entry is taken \(cpht.max_shared_tables\)/, $log_at),
	'a start with too few catalog entries names the table it could not restore, and why');

my @open = grep {
	my $t = $_;
	my ($rc) = $node->psql('postgres', "SELECT cpht_open('$t')");
	$rc == 0
} qw(t1 t2 t3);
is(scalar(@open), 2, 'the other two tables are back');

# that server writes to its tables and makes WAL far past the third
# table's snapshot; checkpoints and snapshot rounds run meanwhile
$node->safe_psql('postgres', join('; ',
	map { "SELECT cpht_put(cpht_open('$_'), array_agg(g)) FROM generate_series(2001, 2100) g" } @open));
for my $i (1 .. 4)
{
	$node->safe_psql('postgres', q{
		CREATE TABLE IF NOT EXISTS filler (g int, pad text);
		INSERT INTO filler SELECT g, repeat('x', 300) FROM generate_series(1, 60000) g;
		SELECT pg_switch_wal();
		CHECKPOINT;
		SELECT cpht_checkpoint();
	});
}
$node->safe_psql('postgres', 'DROP TABLE filler; CHECKPOINT');
$node->stop;

# the setting raised again: every table, exactly
$node->append_conf('postgresql.conf', 'cpht.max_shared_tables = 64');
$log_at = -s $node->logfile;
$node->start;
cpht_wait_worker($node);
for my $t (qw(t1 t2 t3))
{
	my $written = grep { $_ eq $t } @open;
	ok(cpht_wait_open($node, 'postgres', $t), "table $t is back once there is room");
	my $want = $written ? '1600 {t,t,t,f,t,f}' : '1500 {t,t,t,f,f,f}';
	is($node->safe_psql('postgres', qq{
			SELECT cpht_count(cpht_open('$t')) || ' ' ||
			       cpht_find(cpht_open('$t'), '{1, 1000, 1500, 1501, 2100, 2101}')::text}),
		$want, "table $t has exactly its committed keys");
}
ok(!$node->log_contains('could not restore durable shared table', $log_at),
	'no table is lost at that start');
$node->stop;

done_testing();
