# Durable shared tables and physical copies of the cluster: a base backup
# taken while a table has changed since its last snapshot, a streaming
# standby made from it (with cpht preloaded), more committed (and rolled
# back) keys on the primary while it streams.  On the standby a durable
# table is refused with an error that says why; the promoted standby holds
# every durable table with exactly the committed keys, those written after
# the backup included.  A second copy of the same backup, started on its
# own, holds them as of the end of the backup: the backup's start
# checkpoint waited for the worker's snapshot round after it.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $preload = q{
shared_preload_libraries = 'cpht'
cpht.transfer_windows = 2
cpht.transfer_chunk = 65536
} . 'cpht.device = ' . cpht_device() . "\n";

# The worker's round after a checkpoint comes late: a backup could copy
# pg_cpht/ before it, unless its start checkpoint waits for that round.
my $primary = cpht_node('primary', "cpht.debug_round_delay = 1500\n");

# 'idle': written before the backup, unchanged since; 'busy': written
# before and after; a rolled-back transaction on each.
$primary->safe_psql('postgres', q{
	SELECT cpht_create(10000, key_bits => 40, name => 'idle', durable => true);
	SELECT cpht_put(cpht_open('idle'), array_agg(g)) FROM generate_series(1, 1000) g;
	SELECT cpht_create(10000, key_bits => 40, name => 'busy', durable => true);
	SELECT cpht_put(cpht_open('busy'), array_agg(g)) FROM generate_series(1, 2000) g;
	BEGIN;
	SELECT cpht_put(cpht_open('busy'), array_agg(g)) FROM generate_series(100001, 100100) g;
	ROLLBACK;
});
is($primary->safe_psql('postgres', 'SELECT cpht_checkpoint() >= 0'), 't',
	'cpht_checkpoint() before the backup');
# 'busy' changes after its snapshot: its file needs WAL from before the
# backup's start (in an earlier segment, which the backup does not hold),
# unless a round after that start writes a new one
$primary->safe_psql('postgres', q{
	SELECT cpht_put(cpht_open('busy'), array_agg(g)) FROM generate_series(2001, 2100) g;
	SELECT pg_switch_wal();
});
# A durable table whose creation is not committed when the backup starts,
# and is committed once it ended: the copy of the backup must not have it,
# the standby (which streams the commit) must.
my $creator = $primary->background_psql('postgres');
$creator->query_safe('BEGIN');
$creator->query_safe("SELECT cpht_create(1000, key_bits => 40, name => 'unsure', durable => true)");
$creator->query_safe("SELECT cpht_put(cpht_open('unsure'), ARRAY[21, 22])");
$primary->backup('b');
$creator->query_safe('COMMIT');
$creator->quit;

# Keys committed once the backup ended.
$primary->safe_psql('postgres', q{
	SELECT cpht_put(cpht_open('busy'), array_agg(g)) FROM generate_series(2101, 2500) g;
});

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', $preload);
$standby->start;

$primary->safe_psql('postgres', q{
	SELECT cpht_put(cpht_open('busy'), array_agg(g)) FROM generate_series(2501, 3000) g;
	SELECT cpht_delete(cpht_open('busy'), array_agg(g)) FROM generate_series(1, 10) g;
	BEGIN;
	SELECT cpht_put(cpht_open('busy'), array_agg(g)) FROM generate_series(200001, 200100) g;
	ROLLBACK;
	SELECT cpht_create(1000, key_bits => 40, name => 'late', durable => true);
	SELECT cpht_put(cpht_open('late'), ARRAY[5, 6, 7]);
});
# a snapshot round of 'busy' while the standby streams
is($primary->safe_psql('postgres', 'SELECT cpht_checkpoint() >= 1'), 't',
	'a snapshot round on the primary while the standby streams');
$primary->safe_psql('postgres', q{
	SELECT cpht_put(cpht_open('busy'), array_agg(g)) FROM generate_series(3001, 3100) g;
});
$primary->wait_for_catchup($standby);

# (a) the standby: a durable table is refused, saying why
my ($rc, $out, $err) = $standby->psql('postgres', "SELECT cpht_open('busy')");
isnt($rc, 0, 'cpht_open of a durable table on a standby fails');
note("standby cpht_open: $err");
like($err, qr/not available on a standby/,
	'the standby says durable tables are not available there');
unlike($err, qr/Create it/, 'the standby does not suggest creating the table');
like($err, qr/promoted/, 'the standby says they come back at promotion');
($rc, $out, $err) = $standby->psql('postgres', 'SELECT count(*) FROM cpht_tables()');
is($rc, 0, 'cpht_tables() runs on a standby');
like($err, qr/durable shared cpht tables are not listed on a standby/,
	'cpht_tables() on a standby says that durable tables are not listed there');

# Contents of table $name on $node: "count missing present-of-others".
sub contents
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

# (c) a second copy of the backup, started on its own (not a standby)
my $copy = PostgreSQL::Test::Cluster->new('copy');
$copy->init_from_backup($primary, 'b');
$copy->append_conf('postgresql.conf', $preload);
$copy->start;
cpht_wait_worker($copy);
is(contents($copy, 'idle', 1, 1000, '0, 1001'), '1000 0 0',
	'the copy of the backup has the idle table, exactly');
is(contents($copy, 'busy', 1, 2100, '0, 2101, 100001, 100100'), '2100 0 0',
	'the copy of the backup has the busy table as of the backup, exactly');
ok(!$copy->log_contains('could not restore durable shared table'),
	'the copy lost no durable table');
($rc, $out, $err) = $copy->psql('postgres', "SELECT cpht_open('unsure')");
like($err, qr/does not exist/,
	'the copy has no table whose creation committed only after the backup');
$copy->stop;

# (b) the standby promoted
$standby->promote;
cpht_wait_worker($standby);
ok(!$standby->log_contains('could not restore durable shared table'),
	'the promoted standby lost no durable table');
is(contents($standby, 'idle', 1, 1000, '0, 1001'), '1000 0 0',
	'the promoted standby has the idle table, exactly');
is(contents($standby, 'busy', 11, 3100, '1, 10, 3101, 100001, 200001, 200100'), '3090 0 0',
	'the promoted standby has the busy table with every committed key, exactly');
is(contents($standby, 'late', 5, 7, '4, 8'), '3 0 0',
	'the promoted standby has the table created while it streamed');
is(contents($standby, 'unsure', 21, 22, '20, 23'), '2 0 0',
	'the promoted standby has the table whose creation was open during the backup');

# the promoted standby writes its own rounds and survives a restart
$standby->safe_psql('postgres',
	"SELECT cpht_put(cpht_open('busy'), ARRAY[1, 2, 3])");
$standby->restart;
cpht_wait_worker($standby);
is(contents($standby, 'busy', 1, 3100, '3101'), '3093 7 0',
	'the promoted standby keeps its durable tables across a restart');

$standby->stop;
$primary->stop;
done_testing();
