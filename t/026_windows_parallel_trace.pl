# Transfer windows (two of 65,536 keys: CphtTest's node) shared by parallel
# workers alone (forced parallel plans, the leader not participating), each
# a new process that enters only the part of a window its call uses and
# prefers a window it entered before: batches that fit a window and batches
# streamed through both windows give the serial answers; cpht.trace's
# NOTICE from each worker splits its hand-over (a window, keys in, the
# worker, statuses out) and their keys add up to the rows; a parallel call
# rolled back to a savepoint leaves nothing and runs again the same; a
# session that used the windows before the cpht worker alone restarted uses
# them after, on the restored durable table.  Every window is free again
# after each part.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('windows_parallel');
my $db = 'postgres';

# 300,000 rows over 120,000 distinct ids; 100,000 more rows, 80,000 of
# them new ids
$node->safe_psql($db, q{
	CREATE TABLE wp_src AS SELECT (g::bigint * 7919 % 120000 + 1) AS id FROM generate_series(1, 300000) g;
	CREATE TABLE wp_more AS SELECT (100000 + g::bigint * 7 % 100000 + 1) AS id FROM generate_series(1, 100000) g;
	ANALYZE wp_src;
	ANALYZE wp_more;
	SELECT cpht_create(400000, name => 'wp');
	SELECT cpht_create(400000, name => 'wp_durable', durable => true);
});
is($node->safe_psql($db, 'SELECT count(DISTINCT id) FROM wp_src'), '120000', 'the source has 120,000 distinct ids');
is($node->safe_psql($db, 'SELECT count(DISTINCT id) FROM wp_more WHERE id > 120000'), '80000',
	'the second source has 80,000 ids the first has not');

# Every window is free again once the calls are done (none leaked, none
# handed out twice).
sub windows_all_free
{
	my ($what) = @_;
	is($node->safe_psql($db, "SELECT cpht_worker_info()->>'windows_free'"), '2', "$what: both windows free again");
}

my $parallel = cpht_parallel_settings(3, '120s');

like($node->safe_psql($db, "$parallel EXPLAIN (COSTS OFF) SELECT cpht_fop_agg('wp', id) FROM wp_src"),
	qr/Gather.*Partial Aggregate/s, 'cpht_fop_agg by name runs in parallel workers');

# ---- batches that fit a window, traced ------------------------------------------
my ($rc, $out, $err) = $node->psql($db, qq{$parallel
	SET cpht.batch_size = 50000;
	SET cpht.trace = on;
	SELECT cpht_fop_agg('wp', id) FROM wp_src;
});
is($rc, 0, 'the traced parallel call ran');
is($out, '120000', 'batches of one window each: every distinct id is new exactly once over the workers');

my @streams = $err =~ /cpht_fop_agg: (\d+) keys in \d+ batches/g;
my @splits = $err =~
  /handed the batches over in [\d.]+ ms and waited [\d.]+ ms for their answers\.  Of the hand-over: waiting for a transfer window [\d.]+ ms, keys into it ([\d.]+) ms, waiting for the worker ([\d.]+) ms, statuses out [\d.]+ ms\./g;
# the worker's side of the same batches: its time on them, and of that the
# transaction's bookkeeping, after the waiting for the worker it is part of
my @worker = $err =~
  /waiting for the worker ([\d.]+) ms, statuses out [\d.]+ ms\.  The worker spent ([\d.]+) ms on these batches, ([\d.]+) ms of it on their transaction's bookkeeping\./g;
ok(@streams >= 1, 'the workers report their streams (' . scalar(@streams) . ')');
my $keys = 0;
$keys += $_ for @streams;
is($keys, 300000, "the workers' streams carried every row's key");
is(scalar(@splits), 2 * scalar(@streams), "each worker's NOTICE splits its hand-over into a window, keys in, the worker and statuses out");
ok((grep { $_ > 0 } @splits[grep { $_ % 2 } 0 .. $#splits]) == scalar(@streams),
	'each worker waited for the worker some time (the split is measured, not left at zero)');
is(scalar(@worker), 3 * scalar(@streams), "each worker's NOTICE gives the cpht worker's time on its batches");
my $worker_ok = 0;
for (my $i = 0; $i + 2 < @worker; $i += 3)
{
	my ($waited, $spent, $txn) = @worker[$i .. $i + 2];
	$worker_ok++ if $spent > 0 && $spent <= $waited + 0.01 && $txn <= $spent + 0.001;
}
is($worker_ok, scalar(@streams),
	"the cpht worker's time is measured, within the wait for it, and its bookkeeping within that");
windows_all_free('after batches of one window');

# ---- batches streamed through both windows --------------------------------------
is($node->safe_psql($db, qq{$parallel
	SET cpht.batch_size = 200000;
	SELECT cpht_fop_agg('wp', id) FROM wp_src;
}), '0', 'batches larger than a window, streamed through both: every id found');
is($node->safe_psql($db, qq{$parallel
	SET cpht.batch_size = 200000;
	SELECT cpht_fop_agg('wp', id) FROM wp_more;
}), '80000', 'streamed batches of new and known ids: the new ones counted once');
is($node->safe_psql($db, "SELECT cpht_count('wp')"), '200000', 'the table holds every id once');
windows_all_free('after streamed batches');

# ---- a savepoint rolled back over a parallel call --------------------------------
is($node->safe_psql($db, qq{$parallel
	SET cpht.batch_size = 50000;
	BEGIN;
	SAVEPOINT a;
	SELECT cpht_fop_agg('wp_durable', id) FROM wp_src;
	ROLLBACK TO SAVEPOINT a;
	SELECT cpht_count('wp_durable');
	SELECT cpht_fop_agg('wp_durable', id) FROM wp_src;
	COMMIT;
}), "120000\n0\n120000", 'a parallel call rolled back to its savepoint left nothing, and ran again the same');

# ---- a session that used the windows, across a restart of the cpht worker alone --
my $s = $node->background_psql($db, on_error_stop => 0);
$s->query_safe($parallel);
$s->query_safe('SET cpht.batch_size = 50000');
is($s->query_safe("SELECT cpht_fop_agg('wp_durable', id) FROM wp_more"), '80000',
	'the long-lived session entered the windows: 80,000 new ids');
cpht_restart_worker($node, wait_restored => 1);
is($s->query_safe("SELECT cpht_fop_agg('wp_durable', id) FROM wp_src"), '0',
	'after the cpht worker alone restarted, the same session and new workers find every id of the restored table');
is($s->query_safe("SELECT cpht_count('wp_durable')"), '200000', 'the restored table kept its keys');
$s->quit;
windows_all_free('after the restart');

$node->stop;
done_testing();
