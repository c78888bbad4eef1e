# Crashes during concurrent loads of a durable table: loaders change it in
# concurrent transactions (find-or-put and delete, random rollbacks and
# savepoint rollbacks) and record what they commit in an ordinary table;
# kill -9 of a loader's backend, of the cpht worker or of the postmaster
# at a random moment; after each restart, and after a clean restart at the
# end, the durable table holds exactly the committed ids.  Dropping it
# leaves no snapshot file and no cpht_durable slot.
#
#   CPHT_DURABLE_ROUNDS=N   rounds (default 12: each kill four times, about
#                           a minute on two cores)
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use CphtTest;

my $rounds = $ENV{CPHT_DURABLE_ROUNDS} || 12;
die "CPHT_DURABLE_ROUNDS must be a positive integer, not '$rounds'" unless $rounds =~ /^[1-9]\d*$/;
my $node = cpht_node('kill', "cpht.snapshot_interval = 1\n");
my $db = 'cpht_durable';

$node->safe_psql('postgres', "CREATE DATABASE $db");
$node->safe_psql($db, q{
	CREATE EXTENSION cpht;
	CREATE TABLE committed_ids (id bigint PRIMARY KEY);
	SELECT cpht_create(1000, name => 'd_load', durable => true);
});

# One loader transaction: put a random batch, record what was new, delete
# a few committed ids, roll back now and then.
sub loader_script
{
	my ($seed) = @_;
	return qq{
SELECT setseed(($seed * 7919 + extract(epoch from clock_timestamp())::bigint % 100000) / 1e6 - 0.5);
BEGIN;
SELECT cpht_open('d_load') AS h \\gset
INSERT INTO committed_ids
	SELECT unnest(cpht_fop_new(:h, ARRAY(SELECT (random() * 20000)::bigint FROM generate_series(1, 200))));
SAVEPOINT s;
INSERT INTO committed_ids
	SELECT unnest(cpht_fop_new(:h, ARRAY(SELECT (random() * 20000)::bigint FROM generate_series(1, 50))));
SELECT CASE WHEN random() < 0.3 THEN 'ROLLBACK TO SAVEPOINT s' ELSE 'RELEASE SAVEPOINT s' END \\gexec
WITH gone AS (DELETE FROM committed_ids WHERE id IN
		(SELECT id FROM committed_ids ORDER BY random() LIMIT 5) RETURNING id)
	SELECT cpht_delete(:h, array_agg(id)) FROM gone;
SELECT CASE WHEN random() < 0.3 THEN 'ROLLBACK' ELSE 'COMMIT' END \\gexec
};
}

# The table holds exactly the committed ids after $what.
sub check_table
{
	my ($what) = @_;
	ok(cpht_wait_open($node, $db, 'd_load'), "d_load is back after $what") or return;
	cpht_check_committed($node, $db, 'd_load', $what);
	return;
}

my $t0 = time();
for my $round (1 .. $rounds)
{
	my $loaders = cpht_start_loaders($node, $db, 4, sub { loader_script($round * 10 + $_[0]) });
	usleep(1_500_000 + int(rand(30)) * 100_000);
	my $log_at = -s $node->logfile;
	my ($what, $killed);
	if ($round % 3 == 0)
	{
		$what = 'kill -9 of the postmaster';
		cpht_kill9_postmaster($node, sub { cpht_stop_loaders($loaders) });
		$killed = 1;
	}
	else
	{
		if ($round % 3 == 1)
		{
			$what = "kill -9 of a loader's backend";
			# a loader's session may end between being chosen and the kill
			# (a signal to a process that exited but is not reaped yet
			# succeeds): the kill landed when the postmaster, having reaped
			# the process, logged its death by signal 9; otherwise choose
			# again (one in a transaction first)
			for (1 .. 50)
			{
				my $victim = $node->safe_psql('postgres', qq{
					SELECT pid FROM pg_stat_activity WHERE datname = '$db'
					ORDER BY state = 'idle', random() LIMIT 1});
				if ($victim ne '' && kill('KILL', $victim))
				{
					my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
					usleep(10_000) while kill(0, $victim) && time() < $deadline;
					if ($node->log_contains(qr/\(PID $victim\) was terminated by signal 9/, $log_at))
					{
						$killed = 1;
						last;
					}
				}
				usleep(50_000);
			}
		}
		else
		{
			$what = 'kill -9 of the cpht worker';
			my $victim = cpht_worker_pid($node);
			$killed = $victim ne '' && kill('KILL', $victim);
		}
		cpht_stop_loaders($loaders);
		cpht_wait_crash_restart($node, $log_at) if $killed;
	}
	ok($killed, "round $round: $what happened");
	check_table("round $round ($what)");
}
note("$rounds crash rounds in " . (time() - $t0) . ' s');

$node->restart;
check_table('a clean restart after the crashes');
$node->safe_psql($db, "SELECT cpht_drop(cpht_open('d_load'))");
is(scalar(cpht_snap_files($node)), 0, 'no snapshot file is left after every durable table was dropped');
is($node->safe_psql($db, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cpht_durable'"),
	'0', 'no cpht_durable slot is left after every durable table was dropped');

$node->stop;
done_testing();
