# Helpers of cpht's TAP tests (t/*.pl): a cluster with cpht preloaded,
# waits for the cpht worker, kills and restarts of its processes, and
# concurrent loader sessions.
#
# Environment:
#   CPHT_TEST_DEVICE=cpu|gpu|auto   cpht.device of every node (cpu unset),
#                                   so that a GPU machine runs the tests
#                                   with GPU tables
package CphtTest;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use POSIX ();
use Time::HiRes qw(usleep);

use Exporter 'import';
our @EXPORT = qw(cpht_node cpht_device cpht_wait_worker cpht_wait_open
  cpht_snap_files cpht_snap_file cpht_worker_pid cpht_restart_worker
  cpht_kill9_postmaster cpht_kill9_backend cpht_wait_crash_restart
  cpht_start_loaders cpht_stop_loaders cpht_contents cpht_check_committed
  cpht_parallel_settings);

# Settings that make the planner choose a parallel plan for any scan, with
# $workers workers and the leader not participating (so that only parallel
# workers call cpht), and a statement timeout of $timeout: prepend them to
# the statements of a session.  cpht_fop_agg over a whole table stays an
# aggregate (cpht.fop_agg_relation_scan off), whose parallel workers these
# tests are about.
sub cpht_parallel_settings
{
	my ($workers, $timeout) = @_;
	return qq{
	SET parallel_setup_cost = 0;
	SET parallel_tuple_cost = 0;
	SET min_parallel_table_scan_size = 0;
	SET max_parallel_workers_per_gather = $workers;
	SET parallel_leader_participation = off;
	SET statement_timeout = '$timeout';
	SET cpht.fop_agg_relation_scan = off;
};
}

# cpht.device of every node: CPHT_TEST_DEVICE, or cpu.
sub cpht_device
{
	my $device = $ENV{CPHT_TEST_DEVICE} || 'cpu';
	die "CPHT_TEST_DEVICE must be cpu, gpu or auto, not '$device'"
	  unless $device =~ /^(cpu|gpu|auto)$/;
	return $device;
}

# A new cluster with cpht in shared_preload_libraries, started (further
# arguments go to initdb).  WAL level
# replica (allows_streaming): durable tables need it and a replication
# slot.  Small transfer windows keep its shared memory small; every
# session uses the device CPHT_TEST_DEVICE names (CPU tables without it)
# unless the test says otherwise.  A crash of a server process restarts
# the cluster (Cluster.pm turns that off).
sub cpht_node
{
	my ($name, $extra_conf, @initdb_extra) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	my $device = cpht_device();

	$node->init(allows_streaming => 1, extra => \@initdb_extra);
	$node->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = 'cpht'
cpht.transfer_windows = 2
cpht.transfer_chunk = 65536
cpht.device = $device
restart_after_crash = on
max_connections = 20
} . ($extra_conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION cpht');
	cpht_wait_worker($node);
	note("cpht.device = $device");
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

# The contents of shared table $name (database postgres) on $node, as
# "count missing present": its key count, how many of the keys $lo..$hi it
# lacks, and how many of the keys $others (a comma-separated list) it
# holds; the error message when it cannot be opened.
sub cpht_contents
{
	my ($node, $name, $lo, $hi, $others) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', qq{
		SELECT cpht_count(h) || ' ' ||
			(SELECT count(*) FROM unnest(cpht_find(h, (SELECT array_agg(g) FROM generate_series($lo, $hi) g))) f WHERE NOT f)
			|| ' ' ||
			(SELECT count(*) FROM unnest(cpht_find(h, ARRAY[$others]::bigint[])) f WHERE f)
		FROM cpht_open('$name') h});
	return $rc == 0 ? $out : $err;
}

# Checks that shared table $name of database $db holds exactly the ids of
# the table committed_ids (the loaders' committed keys, from 0 to 20000):
# its count, none of them missing, none of the others present.
sub cpht_check_committed
{
	my ($node, $db, $name, $what) = @_;
	my ($n, $count, $missing, $extra) = split ' ', $node->safe_psql($db, qq{
SET statement_timeout = '30s';
SELECT cpht_open('$name') AS h \\gset
SELECT (SELECT count(*) FROM committed_ids) || ' ' || cpht_count(:h) || ' ' ||
	(SELECT count(*) FILTER (WHERE NOT f) FROM unnest(cpht_find(:h, ARRAY(SELECT id FROM committed_ids))) f) || ' ' ||
	(SELECT count(*) FILTER (WHERE f) FROM unnest(cpht_find(:h, ARRAY(
		SELECT g FROM generate_series(0, 20000) g EXCEPT SELECT id FROM committed_ids))) f);
});
	is("$count $missing $extra", "$n 0 0",
		"after $what the table holds exactly the $n committed ids (count, missing, others)");
	return;
}

# Waits until table $name of database $db can be opened; false after
# PostgreSQL::Test's timeout (180 s unless PG_TEST_TIMEOUT_DEFAULT).
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

# The path of the snapshot file of durable table $name (the file holds the
# name), or undef.
sub cpht_snap_file
{
	my ($node, $name) = @_;
	my $dir = $node->data_dir . '/pg_cpht';
	for my $f (cpht_snap_files($node))
	{
		my $path = "$dir/$f";
		next unless -r $path;
		my $data = slurp_file($path);
		return $path if index($data, $name) >= 0;
	}
	return undef;
}

# The pid of the cpht worker now, or '' when none runs.
sub cpht_worker_pid
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(cpht_worker_info()->>'worker_pid', '')");
}

# SIGTERM to the cpht worker alone (the server goes on); waits until the
# postmaster started a new one and returns its pid.  With wait_restored
# => 1, also until it restored the durable tables.
sub cpht_restart_worker
{
	my ($node, %opts) = @_;
	my ($pid, $starts) = split /\|/, $node->safe_psql('postgres',
		"SELECT cpht_worker_info()->>'worker_pid', cpht_worker_info()->>'worker_starts'");
	die "no cpht worker runs" unless $pid =~ /^\d+$/;
	kill 'TERM', $pid;
	$node->poll_query_until('postgres', qq{
		SELECT (cpht_worker_info()->>'worker_starts')::bigint > $starts
		   AND cpht_worker_info()->>'worker_pid' IS NOT NULL
		   AND cpht_worker_info()->>'worker_pid' <> '$pid'})
	  or die "no new cpht worker after a SIGTERM to $pid";
	cpht_wait_worker($node) if $opts{wait_restored};
	return cpht_worker_pid($node);
}

# The pids of the children of process $pid.
sub children_of
{
	my ($pid) = @_;
	my @children;
	for my $stat (glob('/proc/[0-9]*/stat'))
	{
		open(my $fh, '<', $stat) or next;
		my $line = <$fh>;
		close($fh);
		# pid (comm) state ppid ...; comm may hold spaces and parentheses
		next unless defined $line && $line =~ /^(\d+) \(.*\) \S+ (\d+) /s;
		push @children, $1 if $2 == $pid;
	}
	return @children;
}

# kill -9 of the postmaster, then a fresh start once its orphaned children
# have noticed and ended (a start while they hold the shared memory
# fails); waits for the worker's restore.  $before_start, when given, runs
# right after the kill.
sub cpht_kill9_postmaster
{
	my ($node, $before_start) = @_;
	my ($pm) = split /\n/, slurp_file($node->data_dir . '/postmaster.pid');
	my @children = children_of($pm);
	$node->kill9;
	$before_start->() if $before_start;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $deadline && grep { kill 0, $_ } @children)
	{
		usleep(100_000);
	}
	my @left = grep { kill 0, $_ } @children;
	die "children of the killed postmaster still run: @left" if @left;
	$node->start;
	cpht_wait_worker($node);
	return;
}

# kill -9 of backend $pid: the postmaster restarts the whole cluster;
# waits until it did and the worker restored the durable tables.
sub cpht_kill9_backend
{
	my ($node, $pid) = @_;
	my $log_at = -s $node->logfile;
	kill 'KILL', $pid or die "kill -9 $pid: $!";
	cpht_wait_crash_restart($node, $log_at);
	return;
}

# Waits until the cluster restarted after a crash that happened after log
# offset $log_at, and the worker restored the durable tables.
sub cpht_wait_crash_restart
{
	my ($node, $log_at) = @_;
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_at);
	cpht_wait_worker($node);
	return;
}

# $n loader processes, each running the psql script $script->($seed) in
# a new session, again and again until cpht_stop_loaders; a script that
# fails is run again after 0.2 s (while the server restarts, say).  Their
# stderr goes to $opts{log} when given.  With $opts{kill_after} a session
# is killed after that many seconds and "LOADER KILLED" is logged.
sub cpht_start_loaders
{
	my ($node, $db, $n, $script, %opts) = @_;
	my $stop = PostgreSQL::Test::Utils::tempdir() . '/stop';
	my @cmd = ($node->installed_command('psql'), '-X', '-q',
		'-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($db));
	my @pids;
	for my $l (1 .. $n)
	{
		my $pid = fork();
		die "fork: $!" unless defined $pid;
		if ($pid == 0)
		{
			# no END blocks of Test::More or Cluster.pm in a loader
			eval {
				while (!-e $stop)
				{
					my $sql = $script->($l);
					my ($out, $err) = ('', '');
					my @t = $opts{kill_after}
					  ? (IPC::Run::timeout($opts{kill_after})) : ();
					my $ok = eval { IPC::Run::run(\@cmd, '<', \$sql, '>', \$out, '2>', \$err, @t) };
					my $killed = !defined $ok && $@ =~ /timeout/;
					if (defined $opts{log} && open(my $fh, '>>', $opts{log}))
					{
						print $fh $err;
						print $fh "LOADER KILLED after $opts{kill_after} s\n" if $killed;
						close($fh);
					}
					usleep(200_000) unless $ok;
				}
			};
			POSIX::_exit(0);
		}
		push @pids, $pid;
	}
	return { stop => $stop, pids => \@pids };
}

# Ends the loaders: each finishes the script it runs, then stops.
sub cpht_stop_loaders
{
	my ($loaders) = @_;
	open(my $fh, '>', $loaders->{stop}) or die "$loaders->{stop}: $!";
	close($fh);
	waitpid($_, 0) for @{ $loaders->{pids} };
	unlink($loaders->{stop});
	return;
}

1;
