# Helpers of cpht's TAP tests (t/*.pl): a cluster with cpht preloaded, and
# waits for the cpht worker.
package CphtTest;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Exporter 'import';
our @EXPORT = qw(cpht_node cpht_wait_worker cpht_wait_open cpht_snap_files);

# A new cluster with cpht in shared_preload_libraries, started.  WAL level
# replica (allows_streaming): durable tables need it and a replication
# slot.  Small transfer windows keep its shared memory small; every
# session uses CPU tables unless the test says otherwise.  A crash of a
# server process restarts the cluster (Cluster.pm turns that off).
sub cpht_node
{
	my ($name, $extra_conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init(allows_streaming => 1);
	$node->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = 'cpht'
cpht.transfer_windows = 2
cpht.transfer_chunk = 65536
cpht.device = cpu
restart_after_crash = on
} . ($extra_conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION cpht');
	cpht_wait_worker($node);
	return $node;
}

# Waits until a cpht worker runs and has restored the durable tables
# (cpht_checkpoint() fails until they are back); the database postgres
# has the extension (cpht_node creates it).
sub cpht_wait_worker
{
	my ($node) = @_;
	$node->poll_query_until('postgres', 'SELECT cpht_checkpoint() >= 0')
	  or die "the cpht worker did not come up";
	return;
}

# Waits until table $name of database $db can be opened; false after
# about 30 s.
sub cpht_wait_open
{
	my ($node, $db, $name) = @_;
	return $node->poll_query_until($db,
		"SELECT cpht_open('$name') > 0");
}

# The snapshot files of durable tables in the data directory, sorted.
sub cpht_snap_files
{
	my ($node) = @_;
	my $dir = $node->data_dir . '/pg_cpht';
	opendir(my $dh, $dir) or return ();
	my @files = sort grep { /\.snap$/ } readdir($dh);
	closedir($dh);
	return @files;
}

1;
