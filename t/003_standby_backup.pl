# Durable shared tables and physical copies of the cluster: a base backup
# taken after cpht_checkpoint(), a streaming standby made from it (with
# cpht preloaded), more committed (and rolled back) keys on the primary
# while it streams.  On the standby a durable table is refused with an
# error that says why; the promoted standby holds every durable table with
# exactly the committed keys, those written after the backup included.  A
# second copy of the same backup started on its own should hold them as of
# the end of the backup; it does only when the worker's round after the
# backup's start checkpoint made it into the backup (TODO).
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
cpht.device = cpu
};

my $primary = cpht_node('primary');

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
$primary->backup('b');

# Keys committed once the backup ended.
$primary->safe_psql('postgres', q{
	SELECT cpht_put(cpht_open('busy'), array_agg(g)) FROM generate_series(2001, 2500) g;
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
TODO:
{
	# The WAL of a backup begins at its start checkpoint; a file written
	# before it is usable only through the EXACT record of the worker's
	# round after that checkpoint, and a short backup often ends before
	# that round (docs/durability.md: standbys and base backups).
	local $TODO = 'a backup that ends before the worker\'s next round lacks the WAL its snapshots need';
	is(contents($copy, 'idle', 1, 1000, '0, 1001'), '1000 0 0',
		'the copy of the backup has the idle table, exactly');
	is(contents($copy, 'busy', 1, 2000, '0, 2001, 100001, 100100'), '2000 0 0',
		'the copy of the backup has the busy table as of the backup, exactly');
	ok(!$copy->log_contains('could not restore durable shared table'),
		'the copy lost no durable table');
}
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
