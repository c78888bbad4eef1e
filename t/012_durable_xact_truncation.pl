# A snapshot taken while a transaction that commits and one that rolls back
# had changes on a durable table, the table unchanged since; then enough
# xids for PostgreSQL to drop the pg_xact segment of those transactions
# (about a million subtransactions that roll back: a few seconds) and
# VACUUM FREEZE of every database.  The table comes back as committed at
# the next start.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('xact', "cpht.snapshot_interval = 0\n");
my $db = 'postgres';

$node->safe_psql($db, "SELECT cpht_create(1000, name => 'd_xid', durable => true)");
my $committer = $node->background_psql($db);
my $roller = $node->background_psql($db);
$committer->query_safe('BEGIN');
my $xid = $committer->query_safe('SELECT pg_current_xact_id()');
$committer->query_safe("SELECT cpht_put(cpht_open('d_xid'), '{1,2,3}')");
$roller->query_safe('BEGIN');
$roller->query_safe("SELECT cpht_put(cpht_open('d_xid'), '{4,5}')");
is($node->safe_psql($db, 'SELECT cpht_checkpoint() > 0'), 't',
	'a snapshot of d_xid while two transactions have changes on it');
$committer->query_safe('COMMIT');
$roller->query_safe('ROLLBACK');
$committer->quit;
$roller->quit;

my $next = $node->safe_psql($db, 'SELECT pg_current_xact_id()');
my $burn = ((($xid >> 20) + 1) << 20) - $next + 2000;
$node->safe_psql($db, qq{
CREATE TEMP TABLE burn (x int);
DO \$\$
BEGIN
	FOR i IN 1..$burn LOOP
		BEGIN
			INSERT INTO burn VALUES (1);
			RAISE EXCEPTION 'burn';
		EXCEPTION WHEN raise_exception THEN NULL;
		END;
	END LOOP;
END \$\$;
});
$node->safe_psql('postgres', 'ALTER DATABASE template0 ALLOW_CONNECTIONS true');
for my $d (split /\n/, $node->safe_psql('postgres', 'SELECT datname FROM pg_database'))
{
	$node->safe_psql($d, 'VACUUM FREEZE');
}
$node->safe_psql('postgres', 'ALTER DATABASE template0 ALLOW_CONNECTIONS false');
my $xact_seg = sprintf('%04X', $xid >> 20);
ok(!-f $node->data_dir . "/pg_xact/$xact_seg",
	"pg_xact/$xact_seg (transaction $xid) is truncated after $burn xids");
$node->restart;
ok(cpht_wait_open($node, $db, 'd_xid'), 'd_xid is back after pg_xact was truncated');
is($node->safe_psql($db, "SELECT cpht_find(cpht_open('d_xid'), '{1,2,3,4,5}')::text || ' ' || cpht_count(cpht_open('d_xid'))"),
	'{t,t,t,f,f} 3', 'd_xid has the committed keys alone after pg_xact was truncated');

$node->stop;
done_testing();
