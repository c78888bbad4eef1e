#!/bin/bash
# Durable shared tables on a preloaded throwaway server (run-tests.sh, in the
# pg_virtualenv cluster "regress"; PGVERSION names it), or on another
# preloaded server that this script may stop and start: CPHT_PG_CTL is then
# a command that takes stop, start or restart, and CPHT_PG_LOG its log file.
#   1. a clean restart keeps the keys, count, layout (after growth), device,
#      owner and privileges of durable tables, of both kinds;
#   2. a snapshot with a flipped byte and one of a foreign format version:
#      the server starts, opening those tables fails naming them, the files
#      stay, the other tables are back; a snapshot of format version 1 (slots
#      with a live bit) is converted as it is read;
#   3. a table larger than the server's cpht.max_memory at start: the
#      server starts, opening it fails naming it and the setting, the file
#      stays, and so does the WAL after its snapshot while WAL moves on and
#      checkpoints remove segments; raising the limit and restarting brings
#      it back;
#   4. a table without key_bits keeps its automatic width and every other
#      property (the whole cpht_info) across a clean restart, kill -9 of
#      the postmaster, kill -9 of a backend and SIGTERM of the worker alone,
#      then takes wider, negative and full 64-bit keys;
#   5. an idle durable table does not hold WAL back: rounds move the slot's
#      restart_lsn past it and old segments go; a slot dropped by hand loses
#      no current table at a clean restart; the slot exists only while a
#      durable table does;
#   6. a snapshot taken while two transactions had changes on the table,
#      then pg_xact truncated past them (about a million subtransactions
#      that roll back, VACUUM FREEZE of every database): the table is back
#      as committed;
#   7. a missing, an empty and an unreadable snapshot file: each table is
#      reported lost by name with the reason, the others start; the
#      unreadable one is back once it can be read;
#   8. crashes: loaders change a durable table in concurrent transactions
#      (find-or-put and delete, random rollbacks and savepoint rollbacks)
#      and record what they commit in an ordinary table; kill -9 of a
#      loader's backend, of the cpht worker or of the postmaster at a random
#      moment; after the restart the durable table holds exactly the
#      committed ids.  CPHT_DURABLE_ROUNDS rounds (default 12: each kill
#      four times, about a minute on two cores).
# Every session runs with cpht.device from CPHT_TEST_DEVICE (PGOPTIONS).
set -euo pipefail

: "${CPHT_DURABLE_ROUNDS:=12}"
db=cpht_durable
read -r -a cluster <<<"${CPHT_PG_CTL:-pg_ctlcluster ${PGVERSION:-} regress}"
datadir=$(psql -X -q -At -d postgres -c "SHOW data_directory")
logfile=${CPHT_PG_LOG:-$(pg_lsclusters -h | awk -v v="${PGVERSION:-}" '$1 == v && $2 == "regress" { print $7 }')}
failures=0

fail() {
	echo "== FAILED: $*"
	failures=$((failures + 1))
}

q() {
	psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"
}

# Waits until the server answers and the worker restored table $1, 30 s
# at most (cpht_open itself waits while the worker restores).
wait_restored() {
	local until=$((SECONDS + 30))
	while [ $SECONDS -lt $until ]; do
		if psql -X -q -At -d "$db" -c "SET statement_timeout = '5s'" -c "SELECT cpht_open('$1')" > /dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

snapshot_of() {
	grep -l -a -- "$1" "$datadir"/pg_cpht/*.snap | head -1
}

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "SET client_min_messages = warning" \
	-c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" \
	-c "DROP ROLE IF EXISTS durable_owner" -c "DROP ROLE IF EXISTS durable_other" \
	-c "CREATE ROLE durable_owner LOGIN" -c "CREATE ROLE durable_other LOGIN" \
	-c "ALTER SYSTEM SET cpht.snapshot_interval = 0" -c "SELECT pg_reload_conf()" > /dev/null
q -c "CREATE EXTENSION cpht" -c "GRANT ALL ON SCHEMA public TO durable_owner, durable_other" \
	-c "GRANT CREATE ON DATABASE $db TO durable_owner"

# The slot that keeps WAL for durable tables exists only while one does.
slot_count="SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cpht_durable'"
if ! ls "$datadir"/pg_cpht/*.snap > /dev/null 2>&1; then
	[ "$(q -c "$slot_count")" = 0 ] || fail "the cpht_durable slot exists while no durable table does"
fi

echo "== durable: durable => true needs a name"
out=$(q -c "SELECT cpht_create(100, durable => true)" 2>&1 || true)
grep -q "a durable cpht table needs a name" <<<"$out" || fail "a durable table without a name: $out"

# ---- 1. clean restart -------------------------------------------------------
echo "== durable: a clean restart keeps durable tables"
psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" > /dev/null <<'SQL'
SET ROLE durable_owner;
SELECT cpht_create(1000, 'iceberg', name => 'd_iceberg', durable => true) AS a,
       cpht_create(1000, 'cuckoo', key_bits => 37, name => 'd_cuckoo', durable => true) AS b,
       cpht_create(1000, transactional => false, name => 'd_plain', durable => true) AS c \gset
SELECT cpht_put(:a, array_agg(g)), cpht_put(:b, array_agg(g)), cpht_put(:c, array_agg(g))
  FROM generate_series(1, 30000) g;
SELECT cpht_delete(:a, array_agg(g)), cpht_delete(:b, array_agg(g)), cpht_delete(:c, array_agg(g))
  FROM generate_series(1, 30000, 7) g;
SELECT cpht_create(1000, name => 'not_durable');
SQL
layout="SELECT name, count, owner, device,
	cpht_info(cpht_open(name)) - 'handle' - 'device_free_bytes' - 'last_grow_at' - 'last_grow_ms' - 'staging_bytes' - 'undo_log_bytes'
		- 'last_widen_ms'
	FROM cpht_tables() WHERE shared ORDER BY name"
before=$(q -c "$layout")
grows=$(q -c "SELECT (cpht_info(cpht_open('d_iceberg'))->>'grows')::int > 0")
[ "$grows" = t ] || fail "d_iceberg did not grow before the restart"
"${cluster[@]}" restart
wait_restored d_iceberg || fail "d_iceberg is not back 30 s after a clean restart"
after=$(q -c "$layout")
if [ "$after" != "$(grep -v '^not_durable' <<<"$before")" ]; then
	fail "durable tables changed across a clean restart: before
$before
after
$after"
fi
for t in d_iceberg d_cuckoo d_plain; do
	wrong=$(q -c "SELECT count(*) FROM generate_series(1, 31000) g,
		unnest(cpht_find(cpht_open('$t'), ARRAY(SELECT generate_series(1, 31000))))
		WITH ORDINALITY f(found, i) WHERE i = g AND found <> (g <= 30000 AND (g - 1) % 7 <> 0)")
	[ "$wrong" = 0 ] || fail "$t answers $wrong keys differently after a clean restart"
done
out=$(q -c "SELECT cpht_open('not_durable')" 2>&1 || true)
grep -q 'shared cpht table "not_durable" does not exist' <<<"$out" || fail "a table that is not durable survived: $out"
out=$(q -c "SET ROLE durable_other" -c "SELECT cpht_open('d_iceberg')" 2>&1 || true)
grep -q 'permission denied for shared cpht table "d_iceberg"' <<<"$out" || fail "another role may open a restored table: $out"
[ "$(q -c "SELECT cpht_checkpoint()")" = 0 ] || fail "cpht_checkpoint wrote snapshots of unchanged tables"
grep -q "cpht worker saved 3 durable shared tables" "$logfile" || fail "the clean shutdown saved no snapshots ($logfile)"
echo "== durable: keys, count, layout, device and owner survive a clean restart"

# A snapshot round when the next WAL record would start a page: the
# position after that page's header is not written yet, and flushing up to
# it fails.  Logical messages move the insert position to just past a page
# header (each record's size is learnt from the last one), then the round
# runs; three pages, in case other WAL moved the position in between.
out=$(q 2>&1 <<'SQL' || true
DO $$
DECLARE
	at_page int := 0;
	overhead int := 100;
	lsn pg_lsn;
	before pg_lsn;
	room int;
BEGIN
	FOR i IN 1..20000 LOOP
		lsn := pg_current_wal_insert_lsn();
		IF (lsn - '0/0'::pg_lsn) % 8192 = 24 THEN
			PERFORM cpht_checkpoint();
			at_page := at_page + 1;
			EXIT WHEN at_page = 3;
		END IF;
		room := 8192 - ((lsn - '0/0'::pg_lsn) % 8192)::int;
		before := pg_current_wal_insert_lsn();
		PERFORM pg_logical_emit_message(false, 'cpht', repeat('x', greatest(room - overhead, 1)));
		IF room - overhead >= 1 AND (pg_current_wal_insert_lsn() - before) < room THEN
			overhead := overhead - ((room - (pg_current_wal_insert_lsn() - before))::int);
		ELSIF room - overhead >= 1 THEN
			overhead := overhead + ((pg_current_wal_insert_lsn() - before) - room)::int;
		END IF;
		overhead := least(greatest(overhead, 40), 400);
	END LOOP;
	RAISE NOTICE 'snapshot rounds at a page start: %', at_page;
END $$;
SQL
)
grep -q "snapshot rounds at a page start: [1-3]" <<<"$out" ||
	fail "a snapshot round with the next WAL record at a page start: $out"
echo "== durable: a snapshot round with the next WAL record at a page start"

# ---- 2. corrupt and foreign-version snapshots ---------------------------------
echo "== durable: a corrupt and a foreign-version snapshot"
"${cluster[@]}" stop
corrupt=$(snapshot_of d_cuckoo)
foreign=$(snapshot_of d_plain)
size=$(stat -c %s "$corrupt")
# a byte in the middle of the slots
byte=$(od -An -tu1 -j $((size / 2)) -N1 "$corrupt" | tr -d ' ')
printf "$(printf '\\%03o' $(((byte + 1) % 256)))" | dd of="$corrupt" bs=1 seek=$((size / 2)) conv=notrunc status=none
# format version 99 (the 4 bytes after the 8-byte magic)
printf '\143\000\000\000' | dd of="$foreign" bs=1 seek=8 conv=notrunc status=none
"${cluster[@]}" start
wait_restored d_iceberg || fail "d_iceberg is not back after a start with damaged files of other tables"
out=$(q -c "SELECT cpht_open('d_cuckoo')" 2>&1 || true)
grep -q 'shared cpht table "d_cuckoo" was lost' <<<"$out" && grep -q "checksum" <<<"$out" ||
	fail "opening the table of a corrupt snapshot: $out"
out=$(q -c "SELECT cpht_open('d_plain')" 2>&1 || true)
grep -q 'shared cpht table "d_plain" was lost' <<<"$out" && grep -q "format version 99" <<<"$out" ||
	fail "opening the table of a foreign-version snapshot: $out"
[ -f "$corrupt" ] && [ -f "$foreign" ] || fail "the damaged snapshot files were not left in place"
grep -q 'could not restore durable shared table "d_cuckoo"' "$logfile" ||
	fail "no WARNING naming d_cuckoo in the server log ($logfile)"
echo "== durable: damaged snapshots name their tables, stay in place, and the server runs"
# their tables are created again, which leaves the damaged files alone
q -c "SELECT cpht_create(100, name => 'd_cuckoo', durable => true)" -c "SELECT cpht_create(100, name => 'd_plain')" > /dev/null
[ -f "$corrupt" ] && [ -f "$foreign" ] || fail "creating a lost table again removed a damaged file"
rm -f "$corrupt" "$foreign"

# ---- 2b. a snapshot of format version 1 ------------------------------------------
# Version 1 files hold slots with a live bit: EMPTY 0, a tombstone 2, a live
# slot (code << 1) | 1, where this version's slot is code + 2 and a
# tombstone 1.  d_iceberg's file is rewritten that way (its version, its
# slots, its checksum) while the server is down; it comes back with the
# same layout and answers.
echo "== durable: a version 1 snapshot is converted as it is read"
failures_before_v1=$failures
levels=$(q -c "SELECT string_agg((l->>'slots') || ' ' || (l->>'slot_bits'), ' ' ORDER BY o)
	FROM jsonb_array_elements(cpht_info(cpht_open('d_iceberg'))->'levels') WITH ORDINALITY AS e(l, o)")
before=$(q -c "$layout" | grep '^d_iceberg|')
"${cluster[@]}" stop
v1file=$(snapshot_of d_iceberg)
perl - "$v1file" $levels <<'PERL' || fail "rewriting $v1file as version 1"
use strict;
use warnings;
my ($path, @levels) = @ARGV;
open(my $fh, '+<:raw', $path) or die "open $path: $!";
local $/;
my $data = <$fh>;
# the prefix: 8-byte magic, 4-byte version, 4-byte database, 64-byte name;
# then the header's size
die "not version 2" unless unpack('V', substr($data, 8, 4)) == 2;
substr($data, 8, 4) = pack('V', 1);
my $at = unpack('V', substr($data, 80, 4));
my %fmt = (16 => 'v', 32 => 'V', 64 => 'Q<');
my $live = 0;
while (@levels) {
	my ($slots, $bits) = splice(@levels, 0, 2);
	my $f = $fmt{$bits} or die "slot width $bits";
	my $bytes = $slots * $bits / 8;
	my @s = unpack("$f$slots", substr($data, $at, $bytes));
	for (@s) {
		if ($_ == 1) { $_ = 2; }
		elsif ($_ >= 2) {
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
$crc = $table[($crc ^ $_) & 0xFF] ^ ($crc >> 8) for unpack('C*', substr($data, 0, length($data) - 4));
substr($data, length($data) - 4, 4) = pack('V', $crc ^ 0xFFFFFFFF);
seek($fh, 0, 0);
print $fh $data;
close($fh);
PERL
"${cluster[@]}" start
if ! wait_restored d_iceberg; then
	fail "d_iceberg is not back from a version 1 snapshot: $(q -c "SELECT cpht_open('d_iceberg')" 2>&1 || true)"
else
	after=$(q -c "$layout" | grep '^d_iceberg|')
	[ "$after" = "$before" ] || fail "d_iceberg changed through a version 1 snapshot: before
$before
after
$after"
	wrong=$(q -c "SELECT count(*) FROM generate_series(1, 31000) g,
		unnest(cpht_find(cpht_open('d_iceberg'), ARRAY(SELECT generate_series(1, 31000))))
		WITH ORDINALITY f(found, i) WHERE i = g AND found <> (g <= 30000 AND (g - 1) % 7 <> 0)")
	[ "$wrong" = 0 ] || fail "d_iceberg answers $wrong keys differently after a version 1 snapshot"
	[ "$failures" != "$failures_before_v1" ] ||
		echo "== durable: a version 1 snapshot of d_iceberg comes back with its layout and keys"
fi

# ---- 3. a table above cpht.max_memory at start ------------------------------------
echo "== durable: a table larger than cpht.max_memory at start"
q > /dev/null <<'SQL'
SELECT cpht_create(1000000, name => 'd_big', durable => true);
SELECT cpht_put(cpht_open('d_big'), ARRAY(SELECT generate_series(1, 5000)::bigint));
SQL
big_kb=$(q -c "SELECT (cpht_info(cpht_open('d_big'))->>'bytes')::bigint / 1024")
psql -X -q -d postgres -c "ALTER SYSTEM SET cpht.max_memory = '$((big_kb / 2))kB'" > /dev/null
"${cluster[@]}" restart
wait_restored d_iceberg || fail "d_iceberg is not back after a start with a table above cpht.max_memory"
big=$(snapshot_of d_big)
out=$(q -c "SELECT cpht_open('d_big')" 2>&1 || true)
grep -q 'shared cpht table "d_big" was lost' <<<"$out" && grep -q "cpht.max_memory" <<<"$out" ||
	fail "opening a table above cpht.max_memory at start: $out"
[ -n "$big" ] && [ -f "$big" ] || fail "the snapshot of a table above cpht.max_memory was not left in place"
grep -q 'could not restore durable shared table "d_big"' "$logfile" ||
	fail "no WARNING naming d_big in the server log ($logfile)"
# WAL moves on while the table waits: the other tables' snapshots (and the
# replication slot with them) pass its snapshot into later WAL segments, and
# checkpoints remove older ones; the WAL after its snapshot must stay
for key in 1 8; do
	q -c "CREATE TABLE wal_filler AS SELECT generate_series(1, 50000) g" -c "DROP TABLE wal_filler" > /dev/null
	psql -X -q -d postgres -c "SELECT pg_switch_wal()" > /dev/null
	q -c "SELECT cpht_put(cpht_open('d_iceberg'), '{$key}')" -c "SELECT cpht_put(cpht_open('d_cuckoo'), '{$key}')" \
		-c "SELECT cpht_checkpoint()" > /dev/null
	psql -X -q -d postgres -c "CHECKPOINT" > /dev/null
done
psql -X -q -d postgres -c "ALTER SYSTEM RESET cpht.max_memory" > /dev/null
"${cluster[@]}" restart
if ! wait_restored d_big; then
	q -c "SELECT cpht_open('d_big')" || true
	fail "d_big is not back after cpht.max_memory was raised and the server restarted"
else
	res=$(q -c "SELECT cpht_count(cpht_open('d_big')) || ' ' || (SELECT count(*) FROM unnest(cpht_find(cpht_open('d_big'),
		ARRAY(SELECT generate_series(1, 5001)::bigint))) f WHERE f)")
	[ "$res" = "5000 5000" ] || fail "d_big after its restore (count, keys found of 5000): $res"
	echo "== durable: a table above cpht.max_memory is named, kept on disk, and back once the limit is raised"
fi
q -c "SELECT cpht_drop(cpht_open('d_big'))" > /dev/null || fail "dropping d_big"

# ---- a durable table keeps its memory cap ------------------------------------
# The cpht.max_memory of the creating session caps its owner's shared tables
# (worker/quota.c); the snapshot keeps it, so the restored table is capped as
# before: a superuser's put of 4M keys (9.2MB of slots) meets the 8MB cap.
psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" > /dev/null <<'SQL'
SET cpht.max_memory = '8MB';
SET ROLE durable_owner;
SELECT cpht_create(1000, transactional => false, name => 'd_capped', durable => true);
SQL
"${cluster[@]}" restart
if ! wait_restored d_capped; then
	fail "d_capped is not back 30 s after a clean restart"
else
	out=$(q -c "SELECT cpht_put(cpht_open('d_capped'), ARRAY(SELECT generate_series(1, 4000000)::bigint))" 2>&1 || true)
	grep -q "would exceed its owner's memory cap" <<<"$out" || fail "d_capped lost its memory cap across a restart: $out"
	[ "$(q -c "SELECT cpht_count(cpht_open('d_capped'))")" = 0 ] || fail "d_capped kept keys of a refused put"
	echo "== durable: a durable table keeps its memory cap across a restart"
fi
q -c "SELECT cpht_drop(cpht_open('d_capped'))" > /dev/null || fail "dropping d_capped"

# Starts the server again after a kill -9 of the postmaster whose children
# were $1: they end when they notice.
start_after_postmaster_kill() {
	local children=$1 left=""
	for _ in $(seq 1 300); do
		left=""
		for c in $children; do
			if kill -0 "$c" 2> /dev/null; then
				left="$left $c"
			fi
		done
		[ -n "$left" ] || break
		sleep 0.1
	done
	[ -z "$left" ] || echo "== children of the killed postmaster still running after 30 s:$left"
	for _ in 1 2 3; do
		"${cluster[@]}" start && break
		sleep 2
	done
}

# Waits until the server answers again (after a crash restart).
wait_server() {
	for _ in $(seq 1 300); do
		psql -X -q -At -d postgres -c "SELECT 1" > /dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

# ---- 4. automatic key width across every kind of restart -----------------------
echo "== durable: a table without key_bits keeps every property across every kind of restart"
section_start=$SECONDS
q > /dev/null <<'SQL'
SELECT cpht_create(1000, name => 'd_auto', durable => true);
SELECT cpht_put(cpht_open('d_auto'), ARRAY(SELECT generate_series(1, 100000)::bigint));
SELECT cpht_checkpoint();
SQL
auto_info="SELECT key_bits IS NULL AS auto, cpht_info(cpht_open(name)) - 'handle' - 'device_free_bytes' - 'last_grow_at'
	- 'last_grow_ms' - 'staging_bytes' - 'undo_log_bytes' - 'last_widen_ms'
	FROM cpht_tables() WHERE name = 'd_auto'"
auto_before=$(q -c "$auto_info")
grep -q '^t|.*"key_width": "auto"' <<<"$auto_before" || fail "d_auto is not of automatic width before the restarts: $auto_before"
for kind in clean postmaster backend worker; do
	case $kind in
		clean)
			"${cluster[@]}" restart
			;;
		postmaster)
			pm=$(head -1 "$datadir/postmaster.pid")
			children=$(pgrep -P "$pm" || true)
			kill -9 "$pm"
			start_after_postmaster_kill "$children"
			;;
		backend)
			psql -X -q -d "$db" -c "SELECT pg_sleep(60)" > /dev/null 2>&1 &
			sleeper=$!
			victim=""
			for _ in $(seq 1 100); do
				victim=$(psql -X -q -At -d postgres -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)' LIMIT 1")
				[ -n "$victim" ] && break
				sleep 0.1
			done
			kill -9 "$victim"
			wait "$sleeper" 2> /dev/null || true
			sleep 1
			wait_server || fail "the server is not back 30 s after kill -9 of a backend"
			;;
		worker)
			kill -TERM "$(q -c "SELECT cpht_worker_info()->>'worker_pid'")"
			sleep 1.5
			;;
	esac
	if ! wait_restored d_auto; then
		fail "d_auto is not back 30 s after a restart ($kind): $(q -c "SELECT cpht_open('d_auto')" 2>&1 || true)"
		continue
	fi
	auto_after=$(q -c "$auto_info")
	[ "$auto_after" = "$auto_before" ] || fail "d_auto changed across a restart ($kind): before
$auto_before
after
$auto_after"
done
# wider, negative and full 64-bit keys after the restarts, in WAL until a
# worker restart replays them
res=$(q <<'SQL' 2>&1 || true
SELECT cpht_open('d_auto') AS h \gset
SELECT cpht_find(:h, '{200000,-3,9223372036854775807}')::text || ' ' ||
	cpht_put(:h, '{200000,-3,9223372036854775807,-9223372036854775808,1099511627776}') || ' ' ||
	cpht_find(:h, '{200000,-3,9223372036854775807,-9223372036854775808,1099511627776,5,100001}')::text;
SQL
)
[ "$res" = "{f,f,f} 5 {t,t,t,t,t,t,f}" ] || fail "d_auto after the restarts (finds, puts, finds): $res"
kill -TERM "$(q -c "SELECT cpht_worker_info()->>'worker_pid'")"
sleep 1.5
wait_restored d_auto || fail "d_auto is not back after a worker restart with wide keys in WAL"
res=$(q -c "SELECT cpht_find(cpht_open('d_auto'), '{200000,-3,9223372036854775807,-9223372036854775808,1099511627776,5,100001}')::text
	|| ' ' || cpht_count(cpht_open('d_auto')) || ' ' || (SELECT key_bits IS NULL FROM cpht_tables() WHERE name = 'd_auto')
	|| ' ' || (cpht_info(cpht_open('d_auto'))->>'key_width') || ' ' || (cpht_info(cpht_open('d_auto'))->>'signed_keys')" 2>&1 || true)
[ "$res" = "{t,t,t,t,t,t,f} 100005 true auto true" ] || fail "d_auto after a replay of wide keys: $res"
q -c "SELECT cpht_drop(cpht_open('d_auto'))" > /dev/null || fail "dropping d_auto"
echo "== durable: automatic key width and every property survive every kind of restart ($((SECONDS - section_start)) s)"

# ---- 4b. a new owner across a crash and a clean restart -------------------------
# The change is in WAL (replayed after a crash) and marks the table changed
# (the clean shutdown's round writes a file naming the new owner).
echo "== durable: a new owner survives a crash (WAL) and a clean restart (snapshot)"
q > /dev/null <<'SQL'
SELECT cpht_create(1000, name => 'd_owned', durable => true);
SELECT cpht_put(cpht_open('d_owned'), '{1,2,3}');
SELECT cpht_checkpoint();
SELECT cpht_alter_owner('d_owned', 'durable_other');
SQL
pm=$(head -1 "$datadir/postmaster.pid")
children=$(pgrep -P "$pm" || true)
kill -9 "$pm"
start_after_postmaster_kill "$children"
wait_restored d_owned || fail "d_owned is not back 30 s after kill -9 of the postmaster"
res=$(q -c "SELECT owner::text || ' ' || count FROM cpht_tables() WHERE name = 'd_owned'" 2>&1 || true)
[ "$res" = "durable_other 3" ] || fail "the new owner of d_owned after kill -9 of the postmaster (owner, count): $res"
q -c "SELECT cpht_alter_owner('d_owned', 'durable_owner')" > /dev/null || fail "changing the owner of d_owned back"
"${cluster[@]}" restart
wait_restored d_owned || fail "d_owned is not back 30 s after a clean restart"
res=$(q -c "SELECT owner::text || ' ' || count FROM cpht_tables() WHERE name = 'd_owned'" 2>&1 || true)
[ "$res" = "durable_owner 3" ] || fail "the new owner of d_owned after a clean restart (owner, count): $res"
out=$(q -c "SET ROLE durable_other" -c "SELECT cpht_open('d_owned')" 2>&1 || true)
grep -q 'permission denied for shared cpht table "d_owned"' <<<"$out" || fail "the former owner may open d_owned: $out"
q -c "SELECT cpht_drop(cpht_open('d_owned'))" > /dev/null || fail "dropping d_owned"
echo "== durable: a new owner survives a crash and a clean restart"

# ---- 5. WAL kept for an idle table ---------------------------------------------
# Rounds move the retention point of unchanged tables: the slot follows the
# WAL, old segments go; a slot dropped by hand loses no current table.
echo "== durable: an idle durable table does not hold WAL back"
section_start=$SECONDS
q > /dev/null <<'SQL'
SELECT cpht_create(1000, name => 'd_idle', durable => true);
SELECT cpht_put(cpht_open('d_idle'), '{1,2,3}');
SELECT cpht_checkpoint();
SQL
[ "$(q -c "$slot_count")" = 1 ] || fail "no cpht_durable slot while durable tables exist"
idle_lsn=$(q -c "SELECT pg_current_wal_insert_lsn()")
wal_rounds() {
	for _ in $(seq 1 "$1"); do
		q -c "SELECT pg_switch_wal()" -c "CREATE TABLE wal_filler AS SELECT generate_series(1, 20000) g" \
			-c "DROP TABLE wal_filler" -c "CHECKPOINT" -c "SELECT cpht_checkpoint()" -c "CHECKPOINT" > /dev/null
	done
}
wal_rounds 5
res=$(q -c "SELECT restart_lsn > '$idle_lsn'::pg_lsn, pg_wal_lsn_diff(pg_current_wal_insert_lsn(), restart_lsn) < 3 * 16777216
	FROM pg_replication_slots WHERE slot_name = 'cpht_durable'")
[ "$res" = "t|t" ] || fail "the slot's restart_lsn did not follow WAL past an idle table (moved, close to the insert position): $res"
res=$(q -c "SELECT min(name) > pg_walfile_name('$idle_lsn') FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}\$'")
[ "$res" = t ] || fail "pg_wal still holds the segment of an idle table's snapshot: $(q -c "SELECT min(name) FROM pg_ls_waldir()") $(q -c "SELECT pg_walfile_name('$idle_lsn')")"
# a slot dropped by hand: old WAL goes, and a clean restart still brings every
# current table back
q -c "SELECT pg_drop_replication_slot('cpht_durable')" > /dev/null
for _ in 1 2 3; do
	q -c "SELECT pg_switch_wal()" -c "CREATE TABLE wal_filler AS SELECT generate_series(1, 20000) g" \
		-c "DROP TABLE wal_filler" -c "CHECKPOINT" > /dev/null
done
"${cluster[@]}" restart
if ! wait_restored d_idle; then
	fail "d_idle is not back after a clean restart without its slot: $(q -c "SELECT cpht_open('d_idle')" 2>&1 || true)"
else
	res=$(q -c "SELECT cpht_find(cpht_open('d_idle'), '{1,2,3,4}')::text || ' ' || cpht_count(cpht_open('d_iceberg'))" 2>&1 || true)
	[ "$res" = "{t,t,t,f} $(q -c "SELECT cpht_count(cpht_open('d_iceberg'))" 2>&1)" ] ||
		fail "the tables after a clean restart without their slot: $res"
fi
[ "$(q -c "$slot_count")" = 1 ] || fail "the cpht_durable slot was not made again"
echo "== durable: the slot follows WAL past idle tables, and a dropped slot loses no current table ($((SECONDS - section_start)) s)"

# ---- 6. pg_xact truncated after a snapshot kept an open transaction -------------
# A snapshot taken while a transaction that commits and one that rolls back
# had changes on the table; the table stays unchanged; then enough xids for
# PostgreSQL to drop the pg_xact segment of those transactions (about a
# million subtransactions that roll back: a few seconds) and VACUUM FREEZE
# of every database.  The table comes back at the next start.
echo "== durable: a snapshot with open transactions' changes survives pg_xact truncation"
section_start=$SECONDS
q -c "SELECT cpht_create(1000, name => 'd_xid', durable => true)" > /dev/null
sync_dir=$(mktemp -d)
chmod 777 "$sync_dir"
for who in commit rollback; do
	keys='{1,2,3}'
	[ $who = commit ] || keys='{4,5}'
	psql -X -q -At -d "$db" > /dev/null 2>&1 <<SQL &
BEGIN;
\o $sync_dir/xid_$who
SELECT pg_current_xact_id();
\o
SELECT cpht_put(cpht_open('d_xid'), '$keys');
\! touch $sync_dir/wrote_$who; for i in \$(seq 1 300); do [ -f $sync_dir/go ] && break; sleep 0.1; done
$([ $who = commit ] && echo COMMIT || echo ROLLBACK);
SQL
done
for _ in $(seq 1 300); do
	[ -f "$sync_dir/wrote_commit" ] && [ -f "$sync_dir/wrote_rollback" ] && break
	sleep 0.1
done
[ "$(q -c "SELECT cpht_checkpoint() > 0")" = t ] || fail "no snapshot of d_xid while two transactions had changes on it"
touch "$sync_dir/go"
wait
xid=$(cat "$sync_dir/xid_commit")
rm -rf "$sync_dir"
next=$(q -c "SELECT pg_current_xact_id()")
burn=$(( (((xid >> 20) + 1) << 20) - next + 2000 ))
q > /dev/null <<SQL
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
SQL
psql -X -q -d postgres -c "ALTER DATABASE template0 ALLOW_CONNECTIONS true" > /dev/null
for d in $(psql -X -q -At -d postgres -c "SELECT datname FROM pg_database"); do
	psql -X -q -d "$d" -c "VACUUM FREEZE" > /dev/null
done
psql -X -q -d postgres -c "ALTER DATABASE template0 ALLOW_CONNECTIONS false" > /dev/null
xact_seg=$(printf '%04X' $((xid >> 20)))
[ ! -f "$datadir/pg_xact/$xact_seg" ] || fail "pg_xact/$xact_seg (transaction $xid) was not truncated: the check proves nothing"
"${cluster[@]}" restart
if ! wait_restored d_xid; then
	fail "d_xid is not back after pg_xact was truncated: $(q -c "SELECT cpht_open('d_xid')" 2>&1 || true)"
	tail -5 "$logfile"
else
	res=$(q -c "SELECT cpht_find(cpht_open('d_xid'), '{1,2,3,4,5}')::text || ' ' || cpht_count(cpht_open('d_xid'))")
	[ "$res" = "{t,t,t,f,f} 3" ] || fail "d_xid after pg_xact was truncated: $res"
fi
q -c "SELECT cpht_drop(cpht_open('d_xid'))" > /dev/null || fail "dropping d_xid"
echo "== durable: pg_xact truncated after $burn xids, the table is back as committed ($((SECONDS - section_start)) s)"

# ---- 7. snapshot files removed, emptied, unreadable --------------------------------
echo "== durable: a missing, an empty and an unreadable snapshot file"
section_start=$SECONDS
for t in d_gone d_empty d_locked; do
	q -c "SELECT cpht_create(1000, name => '$t', durable => true)" -c "SELECT cpht_put(cpht_open('$t'), '{7,8,9}')" > /dev/null
done
"${cluster[@]}" stop
rm -f "$(snapshot_of d_gone)"
empty=$(snapshot_of d_empty)
: > "$empty"
locked=$(snapshot_of d_locked)
chmod 000 "$locked"
log_lines=$(wc -l < "$logfile")
"${cluster[@]}" start
wait_restored d_iceberg || fail "d_iceberg is not back after a start with missing and damaged files of other tables"
for t in d_gone:missing d_empty:"not a cpht snapshot file" d_locked:"Permission denied"; do
	name=${t%%:*}
	why=${t#*:}
	out=$(q -c "SELECT cpht_open('$name')" 2>&1 || true)
	grep -q "shared cpht table \"$name\" was lost" <<<"$out" && grep -q "$why" <<<"$out" ||
		fail "opening $name: $out"
	# the server log may trail the answer a little: up to 5 s
	for _ in $(seq 50); do
		tail -n +"$((log_lines + 1))" "$logfile" | grep -q "could not restore durable shared table \"$name\"" && break
		sleep 0.1
	done
	tail -n +"$((log_lines + 1))" "$logfile" | grep -q "could not restore durable shared table \"$name\"" ||
		fail "no WARNING naming $name in the server log: $(tail -n +"$((log_lines + 1))" "$logfile" | grep -E 'WARNING|restore' | head -20)"
done
# the unreadable one comes back once it can be read
chmod 600 "$locked"
"${cluster[@]}" restart
if ! wait_restored d_locked; then
	fail "d_locked is not back once its file is readable again: $(q -c "SELECT cpht_open('d_locked')" 2>&1 || true)"
else
	res=$(q -c "SELECT cpht_find(cpht_open('d_locked'), '{7,8,9,10}')::text")
	[ "$res" = "{t,t,t,f}" ] || fail "d_locked once its file is readable again: $res"
fi
rm -f "$empty"
for t in d_gone d_empty; do
	q -c "SELECT cpht_create(100, name => '$t', durable => true)" > /dev/null || fail "creating $t again"
done
for t in d_gone d_empty d_locked d_idle; do
	q -c "SELECT cpht_drop(cpht_open('$t'))" > /dev/null || fail "dropping $t"
done
echo "== durable: missing and damaged files are named and reported lost, the others start ($((SECONDS - section_start)) s)"

# ---- 8. crashes ---------------------------------------------------------------
echo "== durable: kill -9 of a backend, the worker or the postmaster during concurrent loads ($CPHT_DURABLE_ROUNDS rounds)"
psql -X -q -d postgres -c "ALTER SYSTEM SET cpht.snapshot_interval = 1" -c "SELECT pg_reload_conf()" > /dev/null
q > /dev/null <<'SQL'
CREATE TABLE committed_ids (id bigint PRIMARY KEY);
SELECT cpht_create(1000, name => 'd_load', durable => true);
SQL

# One loader: transactions that put a random batch, record what was new,
# delete a few committed ids, and roll back now and then.
loader() {
	local seed=$1
	while [ ! -f "$stop" ]; do
		psql -X -q -d "$db" > /dev/null 2>&1 <<SQL || sleep 0.2
SELECT setseed(($seed * 7919 + extract(epoch from clock_timestamp())::bigint % 100000) / 1e6 - 0.5);
BEGIN;
SELECT cpht_open('d_load') AS h \gset
INSERT INTO committed_ids
	SELECT unnest(cpht_fop_new(:h, ARRAY(SELECT (random() * 20000)::bigint FROM generate_series(1, 200))));
SAVEPOINT s;
INSERT INTO committed_ids
	SELECT unnest(cpht_fop_new(:h, ARRAY(SELECT (random() * 20000)::bigint FROM generate_series(1, 50))));
SELECT CASE WHEN random() < 0.3 THEN 'ROLLBACK TO SAVEPOINT s' ELSE 'RELEASE SAVEPOINT s' END \gexec
WITH gone AS (DELETE FROM committed_ids WHERE id IN
		(SELECT id FROM committed_ids ORDER BY random() LIMIT 5) RETURNING id)
	SELECT cpht_delete(:h, array_agg(id)) FROM gone;
SELECT CASE WHEN random() < 0.3 THEN 'ROLLBACK' ELSE 'COMMIT' END \gexec
SQL
	done
}

check_table() {
	local what=$1 res
	if ! wait_restored d_load; then
		fail "d_load is not back 30 s after $what"
		tail -40 "$logfile"
		return
	fi
	res=$(q <<'SQL'
SELECT cpht_open('d_load') AS h \gset
SELECT (SELECT count(*) FROM committed_ids) || ' ' || cpht_count(:h) || ' ' ||
	(SELECT count(*) FILTER (WHERE NOT f) FROM unnest(cpht_find(:h, ARRAY(SELECT id FROM committed_ids))) f) || ' ' ||
	(SELECT count(*) FILTER (WHERE f) FROM unnest(cpht_find(:h, ARRAY(
		SELECT g FROM generate_series(0, 20000) g EXCEPT SELECT id FROM committed_ids))) f);
SQL
)
	read -r n count missing extra <<<"$res"
	if [ "$count" != "$n" ] || [ "$missing" != 0 ] || [ "$extra" != 0 ]; then
		fail "after $what: $n committed ids, the table counts $count, misses $missing and has $extra others"
	else
		echo "== durable: after $what the table holds exactly the $n committed ids"
	fi
}

stop=$(mktemp -u)
crash_start=$SECONDS
# loaders stop when the stop file exists: however this script ends, they end
trap 'touch "$stop"' EXIT
for round in $(seq 1 "$CPHT_DURABLE_ROUNDS"); do
	rm -f "$stop"
	pids=()
	for l in 1 2 3 4; do
		loader $((round * 10 + l)) &
		pids+=($!)
	done
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.1f", 1.5 + (r % 30) / 10 }')"
	case $((round % 3)) in
		1)
			victim=""
			what="kill -9 of a loader's backend"
			;;
		2)
			victim=$(q -c "SELECT cpht_worker_info()->>'worker_pid'")
			what="kill -9 of the cpht worker"
			;;
		0)
			victim=$(head -1 "$datadir/postmaster.pid")
			what="kill -9 of the postmaster"
			;;
	esac
	children=""
	killed=""
	if [ $((round % 3)) = 1 ]; then
		# a loader's session may end between being chosen and the kill: choose
		# again (one in a transaction first) until a kill lands
		for _ in $(seq 1 50); do
			victim=$(psql -X -q -At -d postgres -c "SELECT pid FROM pg_stat_activity WHERE datname = '$db'
				AND pid <> pg_backend_pid() ORDER BY state = 'idle', random() LIMIT 1")
			if [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null; then
				killed=yes
				break
			fi
			sleep 0.05
		done
	elif [ -n "$victim" ]; then
		children=$(pgrep -P "$victim" || true)
		kill -9 "$victim" && killed=yes
	fi
	[ -n "$killed" ] || fail "round $round: no $what happened (no process to kill)"
	touch "$stop"
	wait "${pids[@]}" 2>/dev/null || true
	if [ $((round % 3)) = 0 ]; then
		# the orphaned children end when they notice; then a fresh start
		start_after_postmaster_kill "$children"
	fi
	for _ in $(seq 1 300); do
		psql -X -q -At -d postgres -c "SELECT 1" > /dev/null 2>&1 && break
		sleep 0.1
	done
	check_table "round $round ($what)"
done
rm -f "$stop"
trap - EXIT
echo "== durable: $CPHT_DURABLE_ROUNDS crash rounds in $((SECONDS - crash_start)) s"

# a clean restart after the crashes, and the settings back
psql -X -q -d postgres -c "ALTER SYSTEM RESET cpht.snapshot_interval" -c "SELECT pg_reload_conf()" > /dev/null
"${cluster[@]}" restart
check_table "a clean restart after the crashes"
for t in d_iceberg d_cuckoo d_load; do
	q -c "SELECT cpht_drop(cpht_open('$t'))" > /dev/null || fail "dropping $t"
done
left=$(ls "$datadir"/pg_cpht/ | grep -c snap || true)
[ "$left" = 0 ] || fail "$left snapshot files left after every durable table was dropped"
[ "$(q -c "$slot_count")" = 0 ] || fail "the cpht_durable slot is left after every durable table was dropped"
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE $db" \
	-c "DROP ROLE durable_owner" -c "DROP ROLE durable_other" > /dev/null || true

if [ $failures -ne 0 ]; then
	echo "== FAILED: $failures durable checks"
	exit 1
fi
echo "== durable: all checks passed"
