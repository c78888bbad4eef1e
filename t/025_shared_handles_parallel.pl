# A shared table's handle used in parallel workers (forced parallel plans,
# the leader not participating, so the workers alone reach the table) where
# the handle no longer reaches the table it named: the workers say what the
# leader says.  Opened before the cpht worker alone restarted: a durable
# table's old handle is "opened before the cpht worker restarted" (58000),
# also inside a savepoint rolled back, and the restored table reached
# through cpht_open keeps its keys; a table that is not durable was lost.
# Dropped by the leader's own open transaction: the workers refuse the
# handle and write nothing, and the rollback keeps the table; a drop rolled
# back to its savepoint leaves the table to them.  Dropped by the leader
# and reached by a plan made before: "does not exist" (42704) in the
# workers too, not that the leader never opened it.  Dropped and
# created again under its name by another session: the old handle names
# no table, and the new table gets nothing through it.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('handles_parallel');
my $db = 'postgres';

$node->safe_psql($db, q{
	CREATE TABLE hp_src AS SELECT (g * 7919 % 25000 + 1)::bigint AS id FROM generate_series(1, 60000) g;
	ANALYZE hp_src;
	SELECT cpht_create(100000, name => 'hp_durable', durable => true);
	SELECT cpht_create(100000, name => 'hp_lost');
	SELECT cpht_put(cpht_open('hp_durable'), '{1,2,3}');
});

my $parallel = cpht_parallel_settings(2, '60s');

my $s = $node->background_psql($db, on_error_stop => 0);
$s->query_safe($parallel);
my $hd = $s->query_safe("SELECT cpht_open('hp_durable')");
my $hl = $s->query_safe("SELECT cpht_open('hp_lost')");
like($s->query_safe("EXPLAIN (COSTS OFF) SELECT cpht_fop_agg($hd, id) FROM hp_src"),
	qr/Gather.*Partial Aggregate/s, 'cpht_fop_agg over a shared table runs in parallel workers');

# ---- opened before the cpht worker restarted ------------------------------------
cpht_restart_worker($node, wait_restored => 1);

$s->query("SELECT cpht_fop_agg($hd, id) FROM hp_src");
like($s->{stderr}, qr/cpht table $hd was opened before the cpht worker restarted/,
	"a durable table's handle opened before the restart says so in the parallel workers too");
$s->{stderr} = '';
$s->query("SELECT cardinality(cpht_fop_new($hd, array_agg(id))) FROM hp_src");
like($s->{stderr}, qr/cpht table $hd was opened before the cpht worker restarted/,
	'and so does the fused cpht_fop_new of array_agg');
$s->{stderr} = '';
$s->query("\\set VERBOSITY verbose\nBEGIN; SAVEPOINT sp; SELECT cpht_fop_agg($hd, id) FROM hp_src");
like($s->{stderr}, qr/58000: cpht table $hd was opened before the cpht worker restarted/,
	'inside a savepoint, with its SQLSTATE (58000)');
$s->{stderr} = '';
$s->query_safe("ROLLBACK TO sp");
is($s->query_safe("SELECT cpht_count(cpht_open('hp_durable')); COMMIT"), '3',
	'after the savepoint rolled back, the restored table reached by cpht_open holds its keys');
$s->query("SELECT cpht_fop_agg($hl, id) FROM hp_src");
like($s->{stderr}, qr/shared cpht table "hp_lost" was lost/,
	'a table that was not durable is reported lost in the parallel workers');
$s->{stderr} = '';

# ---- dropped by the leader's open transaction -----------------------------------
my $hx = $s->query_safe("SELECT cpht_create(100000, name => 'hp_dropped', transactional => false)");
$s->query_safe("BEGIN; SELECT cpht_drop($hx)");
$s->query("SELECT cpht_fop_agg($hx, id) FROM hp_src");
like($s->{stderr}, qr/cpht table $hx does not exist/,
	'a table the leader dropped in its open transaction is refused by the parallel workers');
$s->{stderr} = '';
$s->query_safe('ROLLBACK');
$s->query_safe("BEGIN; SELECT cpht_drop(cpht_open('hp_dropped')); SAVEPOINT sp");
$s->query("SELECT cardinality(cpht_fop_new($hx, array_agg(id))) FROM hp_src");
like($s->{stderr}, qr/cpht table $hx does not exist/,
	'and so is the fused cpht_fop_new of array_agg, inside a savepoint');
$s->{stderr} = '';
$s->query_safe('ROLLBACK TO sp; ROLLBACK');
is($s->query_safe("SELECT cpht_count($hx)"), '0',
	'the rollback keeps the table (not transactional), and the workers wrote nothing into it');

$s->query_safe("BEGIN; SAVEPOINT sp; SELECT cpht_drop($hx); ROLLBACK TO sp");
is($s->query_safe("SELECT cpht_fop_agg($hx, id) FROM hp_src; ROLLBACK"), '25000',
	'a drop rolled back to its savepoint leaves the table to the parallel workers');

# ---- dropped by the leader, under a plan made before ----------------------------
my $hq = $s->query_safe("SELECT cpht_create(100000, name => 'hp_prepared', transactional => false)");
$s->query_safe("PREPARE hp_q AS SELECT cpht_fop_agg($hq, id) FROM hp_src");
is($s->query_safe('EXECUTE hp_q'), '25000', 'a prepared cpht_fop_agg runs in parallel workers');
$s->query_safe("SELECT cpht_drop($hq)");
$s->query("\\set VERBOSITY verbose\nEXECUTE hp_q");
like($s->{stderr}, qr/42704: cpht table $hq does not exist/,
	'after the leader dropped the table, the plan made before says it does not exist in the workers too');
$s->{stderr} = '';
$s->query_safe('DEALLOCATE hp_q');

# ---- dropped and created again under its name by another session ----------------
$s->query_safe("SELECT cpht_put($hx, '{7}')");
my $hnew = $node->safe_psql($db,
	"SELECT cpht_drop(cpht_open('hp_dropped')); SELECT cpht_create(100000, name => 'hp_dropped')");
isnt($hnew, $hx, 'the table created again under the name has a new handle');
$s->query("SELECT cpht_fop_agg($hx, id) FROM hp_src");
like($s->{stderr}, qr/cpht table $hx does not exist/,
	'the old handle names no table in the parallel workers');
$s->{stderr} = '';
is($s->query_safe("SELECT cpht_count(cpht_open('hp_dropped'))"), '0',
	'and the new table got nothing through it');
is($s->query_safe("SELECT cpht_fop_agg($hnew, id) FROM hp_src"), '25000',
	'the new table is reached by its name in parallel workers');
$s->quit;

$node->stop;
done_testing();
