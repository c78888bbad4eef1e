# Durable shared tables on a standby that streams for long before it is
# promoted.  The standby's restartpoints remove the WAL after its base
# backup, so the files the backup copied cannot be replayed at promotion
# from there: the standby's cpht worker rolls them forward along replay,
# and keeps the WAL after its last round with a slot of its own.
#
# While the standby streams, the primary: writes a table in many rounds
# (with rolled-back writes among them), leaves another idle, creates one,
# drops one, creates one in a transaction block left open across rounds,
# keeps a transaction that wrote a transactional table open
# across several of the standby's rounds (then commits it), and one more
# open until the promotion (never committed).  The standby's worker is
# restarted alone once; the standby is restarted once.  The promoted
# standby must hold every table with exactly the committed keys.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

# 1 MB segments: a few restartpoints remove the backup's WAL
my $primary = cpht_node('primary', "max_wal_size = 8MB\nmin_wal_size = 2MB\n", '--wal-segsize=1');

$primary->safe_psql('postgres', q{
	CREATE TABLE filler (x bigint, pad text);
	SELECT cpht_create(100000, key_bits => 40, name => 'steady', durable => true);
	SELECT cpht_put(cpht_open('steady'), array_agg(g)) FROM generate_series(1, 1000) g;
	SELECT cpht_create(10000, key_bits => 40, name => 'idle', durable => true);
	SELECT cpht_put(cpht_open('idle'), array_agg(g)) FROM generate_series(1, 500) g;
	SELECT cpht_create(10000, key_bits => 40, name => 'doomed', durable => true);
	SELECT cpht_put(cpht_open('doomed'), ARRAY[1, 2, 3]);
	SELECT cpht_create(10000, key_bits => 40, name => 'txn', durable => true, transactional => true);
	SELECT cpht_put(cpht_open('txn'), ARRAY[1, 2, 3]);
});
$primary->backup('b');
my $backup_segment = $primary->safe_psql('postgres',
	"SELECT pg_walfile_name(pg_current_wal_lsn())");

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
# rounds every second; small WAL so that restartpoints remove segments
$standby->append_conf('postgresql.conf', "cpht.snapshot_interval = 1\nmax_wal_size = 8MB\nmin_wal_size = 2MB\n");
$standby->start;
cpht_wait_worker($standby);

# A transaction that wrote 'txn' stays open across the standby's rounds.
my $open = $primary->background_psql('postgres');
$open->query_safe('BEGIN');
$open->query_safe(
	"SELECT cpht_put(cpht_open('txn'), array_agg(g)) FROM generate_series(1001, 1100) g");

# A durable table created in a transaction block that stays open across
# the standby's rounds too (committed in round 3).
my $creator = $primary->background_psql('postgres');
$creator->query_safe('BEGIN');
$creator->query_safe("SELECT cpht_create(1000, key_bits => 40, name => 'slow', durable => true)");
$creator->query_safe("SELECT cpht_put(cpht_open('slow'), ARRAY[11, 12, 13, 14])");

# WAL of other tables, a checkpoint, and a restartpoint on the standby.
sub churn
{
	$primary->safe_psql('postgres', q{
		INSERT INTO filler SELECT g, repeat('x', 200) FROM generate_series(1, 8000) g;
		DELETE FROM filler;
		SELECT pg_switch_wal();
		CHECKPOINT;
	});
	$primary->wait_for_catchup($standby);
	$standby->safe_psql('postgres', 'CHECKPOINT');
}

for my $round (1 .. 6)
{
	my $lo = 1000 * $round + 1;
	my $hi = 1000 * $round + 1000;
	$primary->safe_psql('postgres', qq{
		SELECT cpht_put(cpht_open('steady'), array_agg(g)) FROM generate_series($lo, $hi) g;
		BEGIN;
		SELECT cpht_put(cpht_open('steady'), array_agg(g)) FROM generate_series($lo + 1000000, $hi + 1000000) g;
		ROLLBACK;
	});
	if ($round == 2)
	{
		$primary->safe_psql('postgres', q{
			SELECT cpht_create(1000, key_bits => 40, name => 'late', durable => true);
			SELECT cpht_put(cpht_open('late'), ARRAY[5, 6, 7]);
		});
	}
	if ($round == 3)
	{
		$primary->safe_psql('postgres', q{SELECT cpht_drop(cpht_open('doomed'))});
		$creator->query_safe('COMMIT');
		$creator->quit;
		# a primary's round: files that keep the open transaction's changes
		$primary->safe_psql('postgres', 'SELECT cpht_checkpoint()');
	}
	churn();
	# a round on the standby now (its files follow replay)
	is($standby->safe_psql('postgres', 'SELECT cpht_checkpoint() >= 0'), 't',
		"cpht_checkpoint() on the standby rolls its files forward (round $round)");
	if ($round == 4)
	{
		$open->query_safe('COMMIT');
		$open->query_safe('BEGIN');
		$open->query_safe(
			"SELECT cpht_put(cpht_open('txn'), array_agg(g)) FROM generate_series(2001, 2100) g");
		cpht_restart_worker($standby, wait_restored => 1);
	}
	if ($round == 5)
	{
		$standby->restart;
		cpht_wait_worker($standby);
	}
}

# the backup's WAL is gone from the standby: only its own files hold the tables
my $oldest = $standby->safe_psql('postgres',
	"SELECT min(name) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}\$'");
ok($oldest gt $backup_segment,
	"the standby removed the WAL after its base backup ($oldest > $backup_segment)");
my $slot = $standby->safe_psql('postgres',
	"SELECT slot_type || ' ' || (restart_lsn IS NOT NULL) FROM pg_replication_slots WHERE slot_name = 'cpht_durable'");
is($slot, 'physical true', 'the standby keeps the WAL after its last round with a slot of its own');

# the transaction left open holds back only the table it wrote
is($standby->safe_psql('postgres', q{
	SELECT s.wal_keep_lsn > t.wal_keep_lsn
	FROM cpht_stat_tables() s, cpht_stat_tables() t
	WHERE s.name = 'steady' AND t.name = 'txn'}), 't',
	"an open transaction holds back the standby's file of the table it wrote, not the others'");

# a durable table stays closed to the standby's sessions
my ($rc, $out, $err) = $standby->psql('postgres', "SELECT cpht_open('steady')");
like($err, qr/not available on a standby/, 'cpht_open of a durable table on the standby is refused');

# more keys after the standby's last round, then the promotion
$primary->safe_psql('postgres', q{
	SELECT cpht_put(cpht_open('steady'), array_agg(g)) FROM generate_series(7001, 7500) g;
	SELECT cpht_delete(cpht_open('steady'), array_agg(g)) FROM generate_series(1, 10) g;
});
$primary->wait_for_catchup($standby);
$primary->stop('immediate');
$open->quit;
$standby->promote;
cpht_wait_worker($standby);

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

ok(!$standby->log_contains('could not restore durable shared table'),
	'the promoted standby lost no durable table');
is(contents($standby, 'steady', 11, 7500, '1, 10, 7501, 1001001, 1006000'), '7490 0 0',
	'the promoted standby has the table written while it streamed, exactly');
is(contents($standby, 'idle', 1, 500, '0, 501'), '500 0 0',
	'the promoted standby has the idle table, exactly');
is(contents($standby, 'late', 5, 7, '4, 8'), '3 0 0',
	'the promoted standby has the table created while it streamed');
is(contents($standby, 'txn', 1001, 1100, '4, 2001, 2100'), '103 0 0',
	'the promoted standby has the transaction committed after several rounds, and not the one never committed');
is(contents($standby, 'slow', 11, 14, '10, 15'), '4 0 0',
	'the promoted standby has the table whose creation committed after several rounds');
($rc, $out, $err) = $standby->psql('postgres', "SELECT cpht_open('doomed')");
like($err, qr/does not exist/, 'the table dropped while the standby streamed stays dropped');

# the promoted standby is a primary of its own: a restart keeps the tables
$standby->safe_psql('postgres', "SELECT cpht_put(cpht_open('steady'), ARRAY[1, 2, 3])");
$standby->restart;
cpht_wait_worker($standby);
is(contents($standby, 'steady', 1, 7500, '7501'), '7493 7 0',
	'the promoted standby keeps its durable tables across a restart');

$standby->stop;
done_testing();
