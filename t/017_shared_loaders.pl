# The loaders property of transactional shared tables, for both kinds:
# concurrent sessions (pgbench) load overlapping random batches of ids into
# one shared table, record the ids cpht_fop_new reports new, and roll back
# at random (whole transactions and savepoints).  Afterwards:
#   - the ids reported new are exactly the distinct ids of committed
#     batches (each reported once: reported has a primary key);
#   - cpht_count is their number, each is found, and no id that was only
#     in rolled-back batches is in the table;
#   - the table, created for 1000 ids, grew while the sessions loaded it.
#
#   CPHT_LOADERS_TXNS=N   transactions per client (default 150; 8 clients)
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $txns = $ENV{CPHT_LOADERS_TXNS} || 150;
die "CPHT_LOADERS_TXNS must be a positive integer, not '$txns'" unless $txns =~ /^[1-9]\d*$/;
my $clients = 8;
# ids drawn from: enough that some occur only in rolled-back batches even
# in a long run (about 3 attempts per id), never fewer than 10000
my $universe = 70 * $txns;
$universe = 10000 if $universe < 10000;

my $node = cpht_node('loaders');
my $db = 'postgres';

# One loader transaction: two batches of ids from a small universe, the
# second after a savepoint; the ids cpht_fop_new reports new go into
# reported (a primary key: an id reported new twice fails the transaction
# loudly); each batch is recorded in attempts before the transaction (so
# it stays when the transaction rolls back) and marked in done inside it
# (so the mark stays only if the batch committed).  Some transactions roll
# back, some savepoints too.
my $script = PostgreSQL::Test::Utils::tempdir() . '/shared_loaders.pgbench';
open(my $fh, '>', $script) or die "$script: $!";
print $fh <<'PGBENCH';
\set n random(1, 30)
\set m random(1, 30)
\set roll random(1, 4)
\set subroll random(1, 3)
SELECT nextval('loader_tags') AS tag \gset
INSERT INTO attempts SELECT :tag, 0, k FROM (SELECT DISTINCT (random() * :universe)::bigint AS k FROM generate_series(1, :n)) s;
INSERT INTO attempts SELECT :tag, 1, k FROM (SELECT DISTINCT (random() * :universe)::bigint AS k FROM generate_series(1, :m)) s;
BEGIN;
INSERT INTO done VALUES (:tag, 0);
INSERT INTO reported SELECT unnest(cpht_fop_new(cpht_open(':tname'), ARRAY(SELECT id FROM attempts WHERE tag = :tag AND part = 0 ORDER BY random())));
SAVEPOINT s;
INSERT INTO done VALUES (:tag, 1);
INSERT INTO reported SELECT unnest(cpht_fop_new(cpht_open(':tname'), ARRAY(SELECT id FROM attempts WHERE tag = :tag AND part = 1 ORDER BY random())));
\if :subroll = 1
ROLLBACK TO SAVEPOINT s;
\endif
\if :roll = 1
ROLLBACK;
\else
COMMIT;
\endif
PGBENCH
close($fh);

for my $kind (qw(iceberg cuckoo))
{
	my $tname = "loaders_$kind";
	$node->safe_psql($db, qq{
		CREATE SEQUENCE loader_tags;
		CREATE TABLE attempts (tag bigint, part int, id bigint);
		CREATE TABLE done (tag bigint, part int, PRIMARY KEY (tag, part));
		CREATE TABLE reported (id bigint PRIMARY KEY);
		SELECT cpht_create(1000, '$kind', name => '$tname');
	});
	note("loaders ($kind): $clients sessions x $txns transactions over $universe ids");
	# Crossed batches deadlock now and then (40P01): pgbench runs such a
	# transaction again, as an application would.
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ $node->installed_command('pgbench'), '-n', '-f', $script,
			'-c', $clients, '-j', $clients, '-t', $txns, '--max-tries=1000',
			'-D', "universe=$universe", '-D', "tname=$tname", '-h', $node->host,
			'-p', $node->port, $db ], '>', \$out, '2>', \$err);
	ok($ok, "loaders ($kind): pgbench reports no error") or diag("$out\n$err");
	note($_) for grep { /^number of (transactions actually processed|failed transactions|transactions retried)/ } split /\n/, $out;

	my ($committed, $rolled_back_only, $never_reported, $reported_alone, $count, $reported,
		$not_found, $found_rolled_back, $grows) = split /\|/, $node->safe_psql($db, qq{
WITH committed AS (
	SELECT DISTINCT a.id FROM attempts a JOIN done d USING (tag, part)
), rolled_back_only AS (
	SELECT id FROM attempts EXCEPT SELECT id FROM committed
)
SELECT (SELECT count(*) FROM committed),
	(SELECT count(*) FROM rolled_back_only),
	(SELECT count(*) FROM (SELECT id FROM committed EXCEPT SELECT id FROM reported) c),
	(SELECT count(*) FROM (SELECT id FROM reported EXCEPT SELECT id FROM committed) r),
	cpht_count(cpht_open('$tname')),
	(SELECT count(*) FROM reported),
	(SELECT count(*) FROM unnest(cpht_find(cpht_open('$tname'), ARRAY(SELECT id FROM reported))) f WHERE NOT f),
	(SELECT count(*) FROM unnest(cpht_find(cpht_open('$tname'), ARRAY(SELECT id FROM rolled_back_only))) f WHERE f),
	(cpht_info(cpht_open('$tname'))->>'grows')::int});
	note("loaders ($kind): $committed committed ids, $rolled_back_only ids only in rolled-back batches, $grows growths");
	is($never_reported, '0', "loaders ($kind): every committed id was reported new");
	is($reported_alone, '0', "loaders ($kind): no id was reported new by no committed batch");
	is($count, $reported, "loaders ($kind): cpht_count is the number of reported ids");
	is($not_found, '0', "loaders ($kind): every reported id is found");
	is($found_rolled_back, '0', "loaders ($kind): no id only rolled-back batches had is in the table");
	cmp_ok($rolled_back_only, '>', 0, "loaders ($kind): some batches rolled back");
	cmp_ok($grows, '>', 0, "loaders ($kind): the table grew while the sessions loaded it");
	$node->safe_psql($db, qq{
		SELECT cpht_drop(cpht_open('$tname'));
		DROP TABLE attempts, done, reported;
		DROP SEQUENCE loader_tags;
	});
}

$node->stop;
done_testing();
