# Durable shared tables created and dropped inside transaction blocks, and
# crashes at any point: a creation that did not commit leaves no table, no
# snapshot file and no catalog line after the crash restart, a snapshot
# round meanwhile writes nothing for it; one that committed comes back with
# its keys; a drop that did not commit keeps the table and its keys.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('ddl_txn');

sub crash
{
	my $pid = $node->safe_psql('postgres', "SELECT cpht_worker_info()->>'worker_pid'");
	kill 'KILL', $pid;
	$node->poll_query_until('postgres',
		"SELECT cpht_worker_info()->>'worker_pid' IS NOT NULL AND cpht_worker_info()->>'worker_pid' <> '$pid'")
	  or die "no new cpht worker";
	cpht_wait_worker($node);
	return;
}

sub exists_table
{
	my ($name) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT cpht_count(cpht_open('$name'))");
	return $rc == 0 ? $out : 'missing';
}

sub catalog_names
{
	my $bytes = slurp_file($node->data_dir . '/pg_cpht/catalog');
	my @names;
	push @names, $1 while $bytes =~ /(ddl_[a-z_]+)/g;
	return join(',', sort @names);
}

# a durable table that exists from the start, for the drop
$node->safe_psql('postgres', q{
	SELECT cpht_put(cpht_create(1000, name => 'ddl_kept', durable => true), ARRAY[1, 2, 3]);
});
my @files0 = cpht_snap_files($node);
is(scalar(@files0), 1, 'one durable table, one snapshot file');

# open transactions when the crash comes: a creation (with keys, past a
# snapshot round) and a drop
my $s = $node->background_psql('postgres');
$s->query_safe(q{
	BEGIN;
	SELECT cpht_put(cpht_create(1000, name => 'ddl_open', durable => true), ARRAY[7, 8, 9]);
	SELECT cpht_drop(cpht_open('ddl_kept'));
});
$node->safe_psql('postgres', 'SELECT cpht_checkpoint()');
is_deeply([ cpht_snap_files($node) ], \@files0,
	'a snapshot round writes no file for a durable table whose creation has not committed');
is(catalog_names(), 'ddl_kept', 'nor names it in the catalog');
is(exists_table('ddl_open'), 'missing', 'other sessions do not see it');

crash();
eval { $s->quit; };
is(exists_table('ddl_open'), 'missing',
	'after a crash, a durable table whose creating transaction never committed does not exist');
is_deeply([ cpht_snap_files($node) ], \@files0, 'and has no snapshot file');
is(catalog_names(), 'ddl_kept', 'nor a catalog line');
is(exists_table('ddl_kept'), '3', 'a durable table whose drop never committed is back with its keys');

# a creation that committed, then a crash right away
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT cpht_put(cpht_create(1000, name => 'ddl_done', durable => true), ARRAY[4, 5]);
	SAVEPOINT s;
	SELECT cpht_create(1000, name => 'ddl_sub', durable => true);
	ROLLBACK TO SAVEPOINT s;
	COMMIT;
});
is(scalar(cpht_snap_files($node)), 2, 'a committed creation writes its snapshot file');
$node->safe_psql('postgres', q{
	SELECT cpht_put(cpht_open('ddl_done'), ARRAY[6]);
});
crash();
is(exists_table('ddl_done'), '3', 'a durable table created in a committed transaction is back after a crash, with its keys');
is(exists_table('ddl_sub'), 'missing', 'one created in a savepoint rolled back is not');
is(scalar(cpht_snap_files($node)), 2, 'the rolled-back one left no file');

# rolled back in full, then an immediate shutdown
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT cpht_put(cpht_create(1000, name => 'ddl_undone', durable => true), ARRAY[1]);
	ROLLBACK;
	BEGIN;
	SELECT cpht_drop(cpht_open('ddl_done'));
	ROLLBACK;
});
$node->stop('immediate');
$node->start;
cpht_wait_worker($node);
is(exists_table('ddl_undone'), 'missing', 'a creation rolled back stays undone after an immediate shutdown');
is(exists_table('ddl_done'), '3', 'a drop rolled back keeps the table across it');

# a committed drop inside a block is for good
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT cpht_drop(cpht_open('ddl_done'));
	COMMIT;
});
crash();
is(exists_table('ddl_done'), 'missing', 'a drop committed inside a block stays after a crash');
is(catalog_names(), 'ddl_kept', 'the catalog names the durable table left');

$node->stop;
done_testing();
