-- Export and import of a table's keys: server files (cpht_export_file,
-- cpht_import_file) and streams of bytea chunks (cpht_export,
-- cpht_import_agg), across kinds, key widths and devices; damaged and
-- foreign files; privileges; imports that roll back; shared tables.
-- Tables go where cpht.device says (CPHT_TEST_DEVICE=gpu: the GPU), except
-- where a check puts one on each device.
BEGIN;
SELECT plan(42);

CREATE FUNCTION pg_temp.r64() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT ((random() * 4294967295)::bigint << 32) # (random() * 4294967295)::bigint $$;

-- Files go to a directory of their own under /tmp, removed at the end.
SELECT format('/tmp/cpht_tap_export_%s', pg_backend_pid()) AS dir \gset
SELECT format('COPY (SELECT 1) TO PROGRAM %L', 'mkdir -p ' || :'dir') \gexec

-- Writes bytes to a server file (a large object's export writes them raw).
CREATE FUNCTION pg_temp.write_file(path text, data bytea) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	lo oid := lo_from_bytea(0, data);
BEGIN
	PERFORM lo_export(lo, path);
	PERFORM lo_unlink(lo);
END $$;

-- The keys of a test, and a table holding them.
CREATE TEMP TABLE src_keys (k bigint PRIMARY KEY);
INSERT INTO src_keys
	SELECT DISTINCT pg_temp.r64() FROM generate_series(1, 20000)
	UNION SELECT unnest('{0,-1,9223372036854775807,-9223372036854775808}'::bigint[]);
SELECT cpht_create(1000, 'iceberg', 64) AS ice \gset
SELECT cpht_put(:ice, array_agg(k)) AS ignored FROM src_keys \gset
SELECT count(*) AS nkeys FROM src_keys \gset

-- ---- a file, iceberg -> cuckoo --------------------------------------------
SELECT is(cpht_export_file(:ice, :'dir' || '/ice.keys'), :nkeys::bigint,
	'cpht_export_file writes every key of a table and returns their number');
SELECT is(length(pg_read_binary_file(:'dir' || '/ice.keys')), 64 + 8 * :nkeys + 16,
	'the file has a 64-byte header, 8 bytes a key and a 16-byte trailer');
SELECT is(pg_ls_dir(:'dir'), 'ice.keys', 'no temporary file is left beside it');
SELECT cpht_create(10, 'cuckoo') AS cuc \gset
SELECT is(cpht_import_file(:cuc, :'dir' || '/ice.keys'), :nkeys::bigint,
	'cpht_import_file into an empty cuckoo table: every key is new');
SELECT is(cpht_count(:cuc), :nkeys::bigint, 'the cuckoo table counts the keys of the export');
SELECT ok(NOT (false = ANY (cpht_find(:cuc, (SELECT array_agg(k) FROM src_keys)))),
	'and holds every one of them');
SELECT is(cpht_import_file(:cuc, :'dir' || '/ice.keys'), 0::bigint,
	'importing it again is find-or-put: no key is new');

-- ---- the stream -------------------------------------------------------------
SET LOCAL cpht.batch_size = 1024;
CREATE TEMP TABLE backup AS SELECT * FROM cpht_export(:ice);
RESET cpht.batch_size;
SELECT is((SELECT string_agg(chunk, ''::bytea ORDER BY seq) FROM backup),
	pg_read_binary_file(:'dir' || '/ice.keys'),
	'the chunks of cpht_export concatenated in seq order are the file byte for byte');
SELECT ok((SELECT count(*) > 10 AND max(length(chunk)) <= 1024 * 8 FROM backup),
	'an export streams in chunks of at most cpht.batch_size keys');
SELECT is((SELECT substr(chunk, 1, 8) FROM backup WHERE seq = 1), '\x435048544b455953'::bytea,
	'the header starts with the magic CPHTKEYS');
SELECT is((SELECT ARRAY[get_byte(chunk, 8), get_byte(chunk, 12), get_byte(chunk, 24), get_byte(chunk, 28)]
		   FROM backup WHERE seq = 1), ARRAY[1, 64, 64, 0],
	'header: version 1, header size 64, key_bits 64, kind iceberg');
SELECT is((SELECT get_byte(chunk, 16) + 256 * get_byte(chunk, 17) + 65536 * get_byte(chunk, 18)
		   + get_byte(chunk, 19) + get_byte(chunk, 20) + get_byte(chunk, 21) + get_byte(chunk, 22) + get_byte(chunk, 23)
		   FROM backup WHERE seq = 1), :nkeys,
	'header: the key count, little-endian');
SELECT is((SELECT substr(chunk, 1, 8) FROM backup ORDER BY seq DESC LIMIT 1), '\x435048545f454e44'::bytea,
	'the last chunk is the trailer (CPHT_END and the CRC)');

SELECT cpht_create(10, 'cuckoo') AS cuc2 \gset
SELECT is((SELECT cpht_import_agg(:cuc2, chunk ORDER BY seq) FROM backup), :nkeys::bigint,
	'cpht_import_agg loads the chunks of an export');
SELECT is(cpht_count(:cuc2), :nkeys::bigint, 'into a table that then counts them');
-- the same bytes split at arbitrary places, keys cut in two
SELECT cpht_create(10) AS ice2 \gset
SELECT is((SELECT cpht_import_agg(:ice2, substr(b, i, 1001) ORDER BY i)
		   FROM (SELECT string_agg(chunk, ''::bytea ORDER BY seq) AS b FROM backup) s,
				generate_series(1, length(b), 1001) i), :nkeys::bigint,
	'cpht_import_agg takes an export split anywhere, keys cut between chunks');
SELECT ok(NOT (false = ANY (cpht_find(:ice2, (SELECT array_agg(k) FROM src_keys)))),
	'and the table holds every key');

-- ---- key widths ---------------------------------------------------------------
SELECT cpht_create(1000, key_bits => 40) AS narrow \gset
SELECT cpht_put(:narrow, ARRAY(SELECT g::bigint * 1000003 FROM generate_series(0, 5000) g)) AS ignored \gset
SELECT cpht_create(10, 'cuckoo', key_bits => 24) AS tiny \gset
SELECT cpht_create(10, key_bits => 64) AS wide \gset
SELECT is((SELECT cpht_import_agg(:wide, chunk ORDER BY seq) FROM cpht_export(:narrow)), 5001::bigint,
	'an export of a 40-bit table loads into a 64-bit one');
SELECT throws_ok(format('SELECT cpht_import_agg(%s, chunk ORDER BY seq) FROM cpht_export(%s)', :tiny, :narrow),
	'22003', NULL, 'a key outside the key_bits of the table it goes to is 22003');
SELECT is(cpht_count(:tiny), 0::bigint, 'and that import stored no key');
SELECT cpht_delete(:narrow, ARRAY(SELECT g::bigint * 1000003 FROM generate_series(16, 5000) g)) IS NOT NULL AS ignored \gset
SELECT is((SELECT cpht_import_agg(:tiny, chunk ORDER BY seq) FROM cpht_export(:narrow)), 16::bigint,
	'keys that fit load into a 24-bit table (deleted keys are not exported)');

-- ---- damaged and foreign files --------------------------------------------------
SELECT pg_read_binary_file(:'dir' || '/ice.keys') AS good \gset
-- not transactional: a key put before a failure would stay
SELECT cpht_create(10, transactional => false) AS victim \gset
SELECT pg_temp.write_file(:'dir' || '/flipped.keys',
	set_byte(:'good'::bytea, 64 + 8 * 100 + 3, get_byte(:'good'::bytea, 64 + 8 * 100 + 3) # 1)) AS ignored \gset
SELECT throws_ok(format('SELECT cpht_import_file(%s, %L)', :victim, :'dir' || '/flipped.keys'),
	'XX001', NULL, 'a file with one bit of a key flipped fails its CRC (XX001)');
SELECT pg_temp.write_file(:'dir' || '/torn.keys', substr(:'good'::bytea, 1, length(:'good'::bytea) - 5)) AS ignored \gset
SELECT throws_ok(format('SELECT cpht_import_file(%s, %L)', :victim, :'dir' || '/torn.keys'),
	'XX001', NULL, 'a torn file (its end missing) is XX001');
SELECT pg_temp.write_file(:'dir' || '/v2.keys', set_byte(:'good'::bytea, 8, 2)) AS ignored \gset
SELECT throws_ok(format('SELECT cpht_import_file(%s, %L)', :victim, :'dir' || '/v2.keys'),
	'0A000', NULL, 'a file of another format version is 0A000');
SELECT pg_temp.write_file(:'dir' || '/foreign.keys', convert_to(repeat('not cpht keys ', 10), 'UTF8')) AS ignored \gset
SELECT throws_ok(format('SELECT cpht_import_file(%s, %L)', :victim, :'dir' || '/foreign.keys'),
	'22P03', NULL, 'a file that is no cpht export is 22P03');
SELECT is(cpht_count(:victim), 0::bigint, 'a damaged file changes no table: it is checked before any key is put');
SELECT throws_ok(format($q$SELECT cpht_import_agg(%s, CASE WHEN seq = 5 THEN set_byte(chunk, 9, get_byte(chunk, 9) # 128) ELSE chunk END ORDER BY seq) FROM backup$q$, :victim),
	'XX001', NULL, 'a damaged stream fails its CRC (XX001)');
SELECT throws_ok(format('SELECT cpht_import_agg(%s, chunk ORDER BY seq) FROM backup WHERE seq <> 3', :victim),
	'XX001', NULL, 'a stream with a chunk missing is XX001');
SELECT throws_ok(format('SELECT cpht_import_agg(%s, chunk ORDER BY seq) FROM (SELECT * FROM backup UNION ALL SELECT 1000000, chunk FROM backup WHERE seq = 2) b', :victim),
	'XX001', NULL, 'a stream with bytes after its trailer is XX001');

-- ---- an import rolls back with its (sub)transaction -----------------------------
SELECT cpht_create(10) AS txn \gset
SELECT cpht_put(:txn, '{1,2,3}') AS ignored \gset
SAVEPOINT before_import;
SELECT is(cpht_import_file(:txn, :'dir' || '/ice.keys'), :nkeys::bigint - 0, 'an import inside a transaction');
ROLLBACK TO SAVEPOINT before_import;
SELECT is(cpht_count(:txn), 3::bigint, 'rolled back with its subtransaction: only the keys before it are left');
SELECT is(cpht_find(:txn, '{1,2,3,0,-1}'), '{t,t,t,f,f}', 'none of the imported keys is found');

-- ---- an export sees one state of the table ---------------------------------------
SET LOCAL cpht.batch_size = 1024;
SELECT throws_ok(format('SELECT count(cpht_put(%s, ARRAY[-5 - seq])) FROM (SELECT (cpht_export(%s)).seq) s', :ice, :ice),
	'40001', NULL, 'a table changed while it is exported ends the export with 40001');
RESET cpht.batch_size;

-- ---- privileges ----------------------------------------------------------------------
CREATE ROLE cpht_tap_plain NOLOGIN;
CREATE ROLE cpht_tap_writer NOLOGIN IN ROLE pg_write_server_files;
CREATE ROLE cpht_tap_reader NOLOGIN IN ROLE pg_read_server_files;
SET LOCAL ROLE cpht_tap_plain;
SELECT throws_ok(format('SELECT cpht_export_file(%s, %L)', :ice, :'dir' || '/plain.keys'),
	'42501', NULL, 'a role without pg_write_server_files may not export to a server file (42501)');
SELECT throws_ok(format('SELECT cpht_import_file(%s, %L)', :cuc, :'dir' || '/ice.keys'),
	'42501', NULL, 'a role without pg_read_server_files may not import a server file (42501)');
SELECT is((SELECT count(*) FROM cpht_export(:ice)) >= 3, true, 'any role that may use a table may stream its export');
RESET ROLE;
SET LOCAL ROLE cpht_tap_writer;
SELECT is(cpht_export_file(:narrow, :'dir' || '/writer.keys'), 16::bigint,
	'a member of pg_write_server_files may export to a server file');
SELECT throws_ok(format('SELECT cpht_import_file(%s, %L)', :cuc, :'dir' || '/writer.keys'),
	'42501', NULL, 'but not import one without pg_read_server_files');
RESET ROLE;
SET LOCAL ROLE cpht_tap_reader;
SELECT is(cpht_import_file(:tiny, :'dir' || '/writer.keys'), 0::bigint,
	'a member of pg_read_server_files may import a server file');
RESET ROLE;

-- ---- across devices ---------------------------------------------------------------------
CREATE FUNCTION pg_temp.cross_device() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	cpu_h int;
	gpu_h int;
	n bigint;
BEGIN
	SET LOCAL cpht.device = cpu;
	cpu_h := cpht_create(100, 'cuckoo');
	PERFORM cpht_put(cpu_h, (SELECT array_agg(k) FROM src_keys));
	BEGIN
		SET LOCAL cpht.device = gpu;
		gpu_h := cpht_create(100);
	EXCEPTION WHEN object_not_in_prerequisite_state THEN
		RETURN NEXT skip('no usable GPU: exports between a CPU and a GPU table not tried', 3);
		RETURN;
	END;
	SELECT cpht_import_agg(gpu_h, chunk ORDER BY seq) INTO n FROM cpht_export(cpu_h);
	RETURN NEXT is(n, (SELECT count(*) FROM src_keys), 'a CPU table''s export loads into a GPU table');
	PERFORM cpht_delete(cpu_h, (SELECT array_agg(k) FROM src_keys));
	SELECT cpht_import_agg(cpu_h, chunk ORDER BY seq) INTO n FROM cpht_export(gpu_h);
	RETURN NEXT is(n, (SELECT count(*) FROM src_keys), 'and the GPU table''s export back into a CPU table');
	RETURN NEXT ok(NOT (false = ANY (cpht_find(cpu_h, (SELECT array_agg(k) FROM src_keys)))),
		'with every key');
END $$;
SELECT pg_temp.cross_device();

SELECT format('COPY (SELECT 1) TO PROGRAM %L', 'rm -rf ' || :'dir') \gexec
SELECT * FROM finish();
ROLLBACK;
