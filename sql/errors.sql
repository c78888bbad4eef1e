-- Every error cpht raises, with its message, detail and hint.  The SQLSTATEs
-- are checked in test/pgtap/errors.sql.

-- bad arguments to cpht_create
SELECT cpht_create(0);
SELECT cpht_create(-5, 'cuckoo');
SELECT cpht_create(100, 'robinhood');
SELECT cpht_create(100, '');
SELECT cpht_create(100, 'iceberg', 7);
SELECT cpht_create(100, 'cuckoo', 65);
SELECT cpht_create(100, 'iceberg', -1);
-- larger than any table cpht can allocate
SELECT cpht_create(9223372036854775807);
SELECT cpht_create(4611686018427387904, 'cuckoo');
-- within the layout but beyond any memory (the detail names the device)
\set VERBOSITY terse
SELECT cpht_create(2251799813685248);
SELECT cpht_create(2251799813685248, 'cuckoo');
\set VERBOSITY default
-- kind names are case-insensitive
SELECT cpht_create(100, 'ICEBERG') AS h1, cpht_create(100, 'Cuckoo') AS h2;

-- unknown and dropped handles
SELECT cpht_fop(0, '{1}');
SELECT cpht_find(3, '{1}');
SELECT cpht_count(-1);
SELECT cpht_drop(2147483647);
SELECT cpht_drop(2);
SELECT cpht_fop(2, '{1}');
SELECT cpht_fop_new(2, '{1}');
SELECT cpht_find(2, '{1}');
SELECT cpht_put(2, '{1}');
SELECT cpht_delete(2, '{1}');
SELECT cpht_count(2);
SELECT cpht_info(2);
SELECT cpht_rebuild(2);
SELECT cpht_rebuild(0);
SELECT cpht_drop(2);
-- an unknown handle is reported even for an empty batch
SELECT cpht_fop(2, '{}');

-- NULL elements: the first one is named by its subscript
SELECT cpht_fop(1, ARRAY[1, NULL, 3]::bigint[]);
SELECT cpht_fop_new(1, ARRAY[NULL]::bigint[]);
SELECT cpht_find(1, '[5:7]={1,2,NULL}'::bigint[]);
SELECT cpht_put(1, ARRAY[NULL, NULL]::bigint[]);
SELECT cpht_delete(1, ARRAY[0, NULL]::bigint[]);
-- a null bitmap without NULLs is fine
SELECT cpht_fop(1, (ARRAY[NULL, 1, 2]::bigint[])[2:3]);

-- arrays of more than one dimension
SELECT cpht_fop(1, '{{1,2},{3,4}}');
SELECT cpht_fop_new(1, '{{1},{2}}');
SELECT cpht_find(1, '{{{1}}}');
SELECT cpht_put(1, '{{1,2}}');
SELECT cpht_delete(1, '{{1,2},{3,4}}');

-- keys outside key_bits (more in key_bits.sql)
SELECT cpht_create(10, 'iceberg', 16) AS h16 \gset
SELECT cpht_fop(:h16, '{65535,65536}');
SELECT cpht_put(:h16, '{-32768}');

-- none of the failed calls changed anything
SELECT handle, kind, key_bits, count FROM cpht_tables() ORDER BY handle;

-- bad settings
SET cpht.device = 'tpu';
SET cpht.cpu_threads = -1;
SET cpht.cpu_threads = 100000;
SET cpht.no_such_setting = 1;

SELECT cpht_drop_all();
