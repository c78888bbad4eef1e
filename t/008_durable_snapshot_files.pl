# The snapshot files of durable tables as a start finds them: a file with a
# flipped byte, one of a foreign format version, a missing, an empty and an
# unreadable one: the server starts, the other tables are back, opening
# each of those tables fails naming it and the reason, a WARNING in the
# server log names it, and the files stay; creating such a table again
# leaves the damaged file alone; the unreadable one is back once it can be
# read.  A file of format version 1 (slots with a live bit) is converted
# as it is read.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('snapfiles', "cpht.snapshot_interval = 0\n");
my $db = 'postgres';

$node->safe_psql($db, q{
SELECT cpht_create(1000, 'iceberg', name => 'd_iceberg', durable => true) AS a,
       cpht_create(1000, 'cuckoo', key_bits => 37, name => 'd_cuckoo', durable => true) AS b,
       cpht_create(1000, transactional => false, name => 'd_plain', durable => true) AS c \gset
SELECT cpht_put(:a, array_agg(g)), cpht_put(:b, array_agg(g)), cpht_put(:c, array_agg(g))
  FROM generate_series(1, 30000) g;
SELECT cpht_delete(:a, array_agg(g)), cpht_delete(:b, array_agg(g)), cpht_delete(:c, array_agg(g))
  FROM generate_series(1, 30000, 7) g;
});
my $layout = q{SELECT name, count, owner, device,
	cpht_info(cpht_open(name)) - 'handle' - 'device_free_bytes' - 'last_grow_at' - 'last_grow_ms' - 'staging_bytes' - 'undo_log_bytes'
		- 'last_widen_ms'
	FROM cpht_tables() WHERE name = 'd_iceberg'};
my $iceberg_keys = q{SELECT count(*) FROM generate_series(1, 31000) g,
	unnest(cpht_find(cpht_open('d_iceberg'), ARRAY(SELECT generate_series(1, 31000))))
	WITH ORDINALITY f(found, i) WHERE i = g AND found <> (g <= 30000 AND (g - 1) % 7 <> 0)};

# Opening table $name fails: it was lost, for a reason matching $why; a
# WARNING after log offset $log_at names it (the log may trail the answer:
# wait_for_log polls).
sub lost_ok
{
	my ($name, $why, $log_at) = @_;
	my ($rc, $out, $err) = $node->psql($db, "SELECT cpht_open('$name')");
	like($err, qr/shared cpht table "$name" was lost.*$why/s,
		"opening $name fails: it was lost ($why)");
	ok(eval { $node->wait_for_log(qr/could not restore durable shared table "$name"/, $log_at) },
		"a WARNING in the server log names $name");
	return;
}

# ---- a flipped byte and a foreign format version ------------------------------------
$node->stop;
my $corrupt = cpht_snap_file($node, 'd_cuckoo');
my $foreign = cpht_snap_file($node, 'd_plain');
ok(defined $corrupt && defined $foreign, 'the clean stop wrote the snapshot files');
{
	# a byte in the middle of the slots
	open(my $fh, '+<:raw', $corrupt) or die "$corrupt: $!";
	my $at = int((-s $corrupt) / 2);
	seek($fh, $at, 0);
	read($fh, my $byte, 1);
	seek($fh, $at, 0);
	print $fh chr((ord($byte) + 1) % 256);
	close($fh);
	# format version 99 (the 4 bytes after the 8-byte magic)
	open($fh, '+<:raw', $foreign) or die "$foreign: $!";
	seek($fh, 8, 0);
	print $fh pack('V', 99);
	close($fh);
}
my $log_at = -s $node->logfile;
$node->start;
ok(cpht_wait_open($node, $db, 'd_iceberg'),
	'd_iceberg is back after a start with damaged files of other tables');
lost_ok('d_cuckoo', 'checksum', $log_at);
lost_ok('d_plain', 'format version 99', $log_at);
ok(-f $corrupt && -f $foreign, 'the damaged snapshot files are left in place');
$node->safe_psql($db, q{
	SELECT cpht_create(100, name => 'd_cuckoo', durable => true);
	SELECT cpht_create(100, name => 'd_plain');
});
ok(-f $corrupt && -f $foreign, 'creating a lost table again leaves its damaged file alone');
unlink($corrupt, $foreign);

# ---- a snapshot of format version 1 -------------------------------------------------
# Version 1 files hold slots with a live bit: EMPTY 0, a tombstone 2, a live
# slot (code << 1) | 1, where this version's slot is code + 2 and a
# tombstone 1.  d_iceberg's file is rewritten that way (its version, its
# slots, its checksum) while the server is down; it comes back with the
# same layout and answers.
sub rewrite_as_version_1
{
	my ($path, @levels) = @_;
	open(my $fh, '+<:raw', $path) or die "open $path: $!";
	local $/;
	my $data = <$fh>;
	# the prefix: 8-byte magic, 4-byte version, 4-byte database, 64-byte
	# name; then the header's size
	die "not version 2" unless unpack('V', substr($data, 8, 4)) == 2;
	substr($data, 8, 4) = pack('V', 1);
	my $at = unpack('V', substr($data, 80, 4));
	my %fmt = (16 => 'v', 32 => 'V', 64 => 'Q<');
	my $live = 0;
	while (@levels)
	{
		my ($slots, $bits) = splice(@levels, 0, 2);
		my $f = $fmt{$bits} or die "slot width $bits";
		my $bytes = $slots * $bits / 8;
		my @s = unpack("$f$slots", substr($data, $at, $bytes));
		for (@s)
		{
			if ($_ == 1) { $_ = 2; }
			elsif ($_ >= 2)
			{
				$_ = (($_ - 2) << 1) | 1;
				die "a slot has no version 1 form" if $bits < 64 && $_ >> $bits;
				$live++;
			}
		}
		substr($data, $at, $bytes) = pack("$f$slots", @s);
		$at += $bytes;
	}
	die "no live slot" unless $live;
	# CRC-32C (Castagnoli, reflected) of everything before the last 4 bytes
	my @table = map {
		my $c = $_;
		$c = $c & 1 ? ($c >> 1) ^ 0x82F63B78 : $c >> 1 for 1 .. 8;
		$c;
	} 0 .. 255;
	my $crc = 0xFFFFFFFF;
	$crc = $table[($crc ^ $_) & 0xFF] ^ ($crc >> 8)
	  for unpack('C*', substr($data, 0, length($data) - 4));
	substr($data, length($data) - 4, 4) = pack('V', $crc ^ 0xFFFFFFFF);
	seek($fh, 0, 0);
	print $fh $data;
	close($fh);
	return;
}
my @levels = split ' ', $node->safe_psql($db, q{
	SELECT string_agg((l->>'slots') || ' ' || (l->>'slot_bits'), ' ' ORDER BY o)
	FROM jsonb_array_elements(cpht_info(cpht_open('d_iceberg'))->'levels') WITH ORDINALITY AS e(l, o)});
my $before = $node->safe_psql($db, $layout);
$node->stop;
rewrite_as_version_1(cpht_snap_file($node, 'd_iceberg'), @levels);
$node->start;
ok(cpht_wait_open($node, $db, 'd_iceberg'), 'd_iceberg is back from a version 1 snapshot');
is($node->safe_psql($db, $layout), $before, 'd_iceberg keeps its layout through a version 1 snapshot');
is($node->safe_psql($db, $iceberg_keys), '0', 'd_iceberg answers every key as before through a version 1 snapshot');

# ---- a missing, an empty and an unreadable snapshot file -----------------------------
for my $t (qw(d_gone d_empty d_locked))
{
	$node->safe_psql($db, "SELECT cpht_create(1000, name => '$t', durable => true);
		SELECT cpht_put(cpht_open('$t'), '{7,8,9}')");
}
$node->stop;
unlink(cpht_snap_file($node, 'd_gone')) or die "removing the file of d_gone: $!";
my $empty = cpht_snap_file($node, 'd_empty');
open(my $fh, '>', $empty) or die "$empty: $!";
close($fh);
my $locked = cpht_snap_file($node, 'd_locked');
chmod(0000, $locked) or die "chmod $locked: $!";
$log_at = -s $node->logfile;
$node->start;
ok(cpht_wait_open($node, $db, 'd_iceberg'),
	'd_iceberg is back after a start with missing and damaged files of other tables');
lost_ok('d_gone', 'missing', $log_at);
lost_ok('d_empty', 'not a cpht snapshot file', $log_at);
lost_ok('d_locked', 'Permission denied', $log_at);

# the unreadable one comes back once it can be read
chmod(0600, $locked) or die "chmod $locked: $!";
$node->restart;
ok(cpht_wait_open($node, $db, 'd_locked'), 'd_locked is back once its file is readable again');
is($node->safe_psql($db, "SELECT cpht_find(cpht_open('d_locked'), '{7,8,9,10}')::text"),
	'{t,t,t,f}', 'd_locked has its keys once its file is readable again');
unlink($empty);
for my $t (qw(d_gone d_empty))
{
	$node->safe_psql($db, "SELECT cpht_create(100, name => '$t', durable => true)");
}
$node->safe_psql($db, "SELECT cpht_drop(cpht_open(t)) FROM unnest('{d_gone,d_empty,d_locked,d_iceberg,d_cuckoo}'::text[]) t");

$node->stop;
done_testing();
