# Restarts of the cpht worker alone (SIGTERM, the server goes on) while
# loaders change a durable transactional shared table.  Each loader runs
# transactions that find-or-put a batch and record the ids reported new in
# an ordinary table (primary key) in the same transaction, add more in a
# savepoint that is released or rolled back, hold the transaction open a
# moment, and commit or roll back.  An ordinary prepared transaction stays
# open across every restart.  In each round the worker gets a SIGTERM at a
# random moment while transactions hold keys; afterwards:
#   - the table holds exactly the committed ids (none lost, none extra);
#   - no id was reported new twice (a second commit of it would break the
#     primary key);
#   - the new worker served while the prepared transaction was open;
#   - no loader statement waited past its statement_timeout (10 s), and no
#     loader needed the 30 s kill of its session.
#
#   CPHT_RESTART_ROUNDS=N   rounds (default 12)
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use CphtTest;

my $rounds = $ENV{CPHT_RESTART_ROUNDS} || 12;
die "CPHT_RESTART_ROUNDS must be a positive integer, not '$rounds'" unless $rounds =~ /^[1-9]\d*$/;
my $node = cpht_node('wloaders', "max_prepared_transactions = 4\n");
my $db = 'postgres';
my $work = PostgreSQL::Test::Utils::tempdir();

$node->safe_psql($db, q{
	CREATE TABLE committed_ids (id bigint PRIMARY KEY);
	CREATE TABLE unrelated (v int);
	SELECT cpht_create(1000, key_bits => 32, name => 'w_load', durable => true);
});

sub loader_script
{
	my ($seed) = @_;
	return qq{
SET statement_timeout = '10s';
SELECT setseed(($seed * 7919 + extract(epoch from clock_timestamp())::bigint % 100000) / 1e6 - 0.5);
BEGIN;
SELECT cpht_open('w_load') AS h \\gset
INSERT INTO committed_ids
	SELECT unnest(cpht_fop_new(:h, ARRAY(SELECT (random() * 20000)::bigint FROM generate_series(1, 100))));
SAVEPOINT s;
INSERT INTO committed_ids
	SELECT unnest(cpht_fop_new(:h, ARRAY(SELECT (random() * 20000)::bigint FROM generate_series(1, 30))));
SELECT CASE WHEN random() < 0.3 THEN 'ROLLBACK TO SAVEPOINT s' ELSE 'RELEASE SAVEPOINT s' END \\gexec
SELECT pg_sleep(random() * 0.3);
INSERT INTO committed_ids
	SELECT unnest(cpht_fop_new(:h, ARRAY(SELECT (random() * 20000)::bigint FROM generate_series(1, 30))));
SELECT CASE WHEN random() < 0.3 THEN 'ROLLBACK' ELSE 'COMMIT' END \\gexec
};
}

sub check_table
{
	my ($what) = @_;
	cpht_check_committed($node, $db, 'w_load', $what);
	return;
}

my $t0 = time();
for my $round (1 .. $rounds)
{
	my $log = "$work/loader_$round.log";
	# an ordinary prepared transaction, open across the restart
	$node->safe_psql($db, "BEGIN; INSERT INTO unrelated VALUES ($round); PREPARE TRANSACTION 'unrelated_$round'");
	my $loaders = cpht_start_loaders($node, $db, 4, sub { loader_script($round * 10 + $_[0]) },
		log => $log, kill_after => 30);
	usleep(1_000_000 + int(rand(20)) * 100_000);
	my $old = cpht_worker_pid($node);
	kill 'TERM', $old;
	# the new worker serves while the prepared transaction stays open
	{
		local $ENV{PGOPTIONS} = '-c statement_timeout=5s';
		ok($node->poll_query_until($db, qq{
			SELECT cpht_worker_info()->>'worker_pid' IS NOT NULL
			   AND cpht_worker_info()->>'worker_pid' <> '$old'
			   AND cpht_count(cpht_open('w_load')) >= 0}),
			"round $round: a new worker serves while a prepared transaction is open");
	}
	usleep(500_000 + int(rand(10)) * 100_000);
	cpht_stop_loaders($loaders);
	$node->safe_psql($db, "COMMIT PREPARED 'unrelated_$round'");
	my $errors = -f $log ? slurp_file($log) : '';
	unlike($errors, qr/duplicate key/, "round $round: no id was reported new twice");
	unlike($errors, qr/statement timeout|LOADER KILLED/,
		"round $round: no loader waited past its statement_timeout");
	check_table("round $round (SIGTERM of the worker alone)");
}
note("$rounds rounds in " . (time() - $t0) . ' s');

# the errors the loaders saw (expected while the worker restarts)
my %seen;
for my $f (glob("$work/loader_*.log"))
{
	for (split /\n/, slurp_file($f))
	{
		next unless /(ERROR: .*)/;
		(my $e = $1) =~ s/(transaction|process|cpht table) \d+/$1 N/g;
		$seen{$e}++;
	}
}
note("errors the loaders saw (expected while the worker restarts):");
note("$seen{$_} $_") for (sort { $seen{$b} <=> $seen{$a} } keys %seen)[0 .. 7];

$node->safe_psql($db, "SELECT cpht_drop(cpht_open('w_load'))");
$node->stop;
done_testing();
