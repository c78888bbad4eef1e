-- cpht_shared_tables, the definitions of shared tables that pg_dump
-- carries: a configuration table of the extension that every role reads
-- and none writes; its rows follow creation (also inside a transaction
-- block, rolled back or committed), if_not_exists, drop (rolled back or
-- not), change of owner, REASSIGN OWNED and DROP OWNED; a row inserted as
-- a restore inserts it creates its table as the row's owner, bound to the
-- inserting transaction; a row whose table cannot be made stays, and
-- cpht_catalog_sync() makes it later and writes rows lost by a failed
-- statement; without the cpht worker a row stays and says why.
-- Shared tables are created in dblink session a (autocommit).
BEGIN;
SELECT plan(20);

\ir include/shared_sessions.psql

SELECT ok('cpht_shared_tables'::regclass = ANY (extconfig),
		  'cpht_shared_tables is a configuration table of the extension (pg_dump carries its rows)')
FROM pg_extension WHERE extname = 'cpht';
SELECT ok(has_table_privilege('public', 'cpht_shared_tables', 'SELECT') AND
		  NOT has_table_privilege('public', 'cpht_shared_tables', 'INSERT') AND
		  NOT has_table_privilege('public', 'cpht_shared_tables', 'UPDATE') AND
		  NOT has_table_privilege('public', 'cpht_shared_tables', 'DELETE'),
		  'every role reads it, no role but its owner writes it');
SELECT ok(NOT has_function_privilege('public', 'cpht_catalog_sync()', 'EXECUTE'),
		  'cpht_catalog_sync() is not PUBLIC');

CREATE FUNCTION pg_temp.row_of(n text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce((SELECT format('%s %s %s %s %s %s', owner, kind, capacity,
								   coalesce(key_bits::text, 'auto'), transactional, durable)
					 FROM cpht_shared_tables WHERE name = n), 'none')
$$;

CREATE FUNCTION pg_temp.shared_tests() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	why text := pg_temp.why_skip();
	me text := current_user;
BEGIN
	IF why IS NOT NULL THEN
		-- without the worker a row inserted by hand makes no table, and says so
		BEGIN
			INSERT INTO cpht_shared_tables VALUES ('cat_plain', current_user::text::regrole, 'iceberg', 1000, NULL, true, false, NULL);
			RETURN NEXT ok(EXISTS (SELECT 1 FROM cpht_shared_tables WHERE name = 'cat_plain'),
						   'without the cpht worker a row inserted by hand stays, with a WARNING');
		END;
		RETURN NEXT skip(why, 16);
		RETURN;
	END IF;
	RETURN NEXT pass('(the plain-server check runs without the cpht worker)');
	PERFORM pg_temp.connect('a');
	PERFORM dblink_exec('a', 'SET statement_timeout = ''60s''');
	PERFORM dblink_exec('a', 'SET client_min_messages = warning');
	PERFORM pg_temp.remote('a', 'SELECT cpht_create(1000, ''cuckoo'', 40, false, name => ''cat_a'')');
	RETURN NEXT is(pg_temp.row_of('cat_a'), me || ' cuckoo 1000 40 f f',
				   'a shared table''s creation writes its row');
	PERFORM pg_temp.remote('a', 'SELECT cpht_create(5000, ''cuckoo'', 40, false, name => ''cat_a'', if_not_exists => true)');
	RETURN NEXT is((SELECT count(*) FROM cpht_shared_tables WHERE name = 'cat_a'), 1::bigint,
				   'if_not_exists on an existing table leaves its one row as it was');
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', 'SELECT cpht_create(1000, name => ''cat_b'')');
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT is(pg_temp.row_of('cat_b'), 'none', 'a creation rolled back leaves no row');
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', 'SELECT cpht_create(1000, name => ''cat_c'')');
	PERFORM dblink_exec('a', 'COMMIT');
	RETURN NEXT is(pg_temp.row_of('cat_c'), me || ' iceberg 1000 auto t f',
				   'a creation committed in a transaction block has its row');
	PERFORM dblink_exec('a', 'BEGIN');
	PERFORM pg_temp.remote('a', 'SELECT cpht_drop(''cat_c'')');
	PERFORM dblink_exec('a', 'ROLLBACK');
	RETURN NEXT isnt(pg_temp.row_of('cat_c'), 'none', 'a drop rolled back keeps the row');
	PERFORM pg_temp.remote('a', 'SELECT cpht_drop(''cat_c'')');
	RETURN NEXT is(pg_temp.row_of('cat_c'), 'none', 'a drop deletes it');

	-- a restore: rows inserted after CREATE EXTENSION make their tables
	PERFORM dblink_exec('a', format(
		'INSERT INTO cpht_shared_tables VALUES (''cat_r'', %L, ''cuckoo'', 2000, 48, false, false, NULL)', me));
	RETURN NEXT is((SELECT v FROM dblink('a', $q$SELECT (cpht_info(cpht_open('cat_r'))->>'kind') || ' ' ||
		(SELECT key_bits FROM cpht_tables() WHERE name = 'cat_r')$q$) AS t(v text)),
		'cuckoo 48', 'a row inserted as a restore does creates its table, as the row says');
	RETURN NEXT is((SELECT count(*) FROM cpht_shared_tables WHERE name = 'cat_r'), 1::bigint,
				   'and keeps its one row');
	-- a row whose table cannot be made keeps its row, the others are made
	PERFORM dblink_exec('a', format(
		'INSERT INTO cpht_shared_tables VALUES (''cat_r2'', %L, ''iceberg'', 1000, NULL, true, false, NULL),
		                                       (''cat_r3'', %L, ''iceberg'', -5, NULL, true, false, NULL)', me, me));
	RETURN NEXT is((SELECT v FROM dblink('a', $q$SELECT string_agg(name, ' ' ORDER BY name) FROM cpht_tables() WHERE name IN ('cat_r2', 'cat_r3')$q$)
					AS t(v text)) || ' / ' || (SELECT string_agg(name, ' ' ORDER BY name) FROM cpht_shared_tables WHERE name IN ('cat_r2', 'cat_r3')),
				   'cat_r2 / cat_r2 cat_r3',
				   'a row whose table cannot be made stays (a WARNING says why), and the other rows'' tables are made');
	PERFORM dblink_exec('a', 'UPDATE cpht_shared_tables SET capacity = 1000 WHERE name = ''cat_r3''');
	RETURN NEXT is((SELECT v FROM dblink('a', 'SELECT cpht_catalog_sync()') AS t(v bigint)), 1::bigint,
				   'once the row is fixed, cpht_catalog_sync() makes its table');
	-- bound to the inserting transaction, even outside a block: one
	-- statement (no block) whose deferred check fails at its commit
	PERFORM dblink_exec('a', 'CREATE TABLE cat_parent (x int PRIMARY KEY)');
	PERFORM dblink_exec('a', 'CREATE TABLE cat_child (x int REFERENCES cat_parent DEFERRABLE INITIALLY DEFERRED)');
	RETURN NEXT throws_ok(format('SELECT dblink_exec(%L, %L)', 'a', format(
		'WITH r AS (INSERT INTO cpht_shared_tables VALUES (''cat_r4'', %L, ''iceberg'', 1000, NULL, true, false, NULL) RETURNING 1)
		 INSERT INTO cat_child SELECT 42 FROM r', me)),
		'23503', NULL, 'an insert whose transaction fails at its commit');
	RETURN NEXT is((SELECT v FROM dblink('a', $q$SELECT count(*) FROM cpht_tables() WHERE name = 'cat_r4'$q$)
					AS t(v bigint)), 0::bigint,
				   'leaves no table: the creation followed the transaction');
	PERFORM dblink_exec('a', 'DROP TABLE cat_child, cat_parent');

	-- a row lost by a failed statement comes back with cpht_catalog_sync()
	PERFORM dblink_exec('a', 'DELETE FROM cpht_shared_tables WHERE name = ''cat_a''');
	RETURN NEXT is((SELECT v FROM dblink('a', 'SELECT cpht_catalog_sync()') AS t(v bigint)) >= 1
				   AND pg_temp.row_of('cat_a') = me || ' cuckoo 1000 40 f f', true,
				   'cpht_catalog_sync() writes the row of a table that had none');

	-- owners: cpht_alter_owner, REASSIGN OWNED, DROP OWNED
	PERFORM dblink_exec('a', 'CREATE ROLE cpht_cat_owner');
	PERFORM dblink_exec('a', 'CREATE ROLE cpht_cat_heir');
	PERFORM dblink_exec('a', format('GRANT CREATE ON DATABASE %I TO cpht_cat_owner, cpht_cat_heir', current_database()));
	PERFORM pg_temp.remote('a', 'SELECT cpht_alter_owner(''cat_a'', ''cpht_cat_owner'')');
	RETURN NEXT is((SELECT owner::text FROM cpht_shared_tables WHERE name = 'cat_a'), 'cpht_cat_owner',
				   'cpht_alter_owner updates the row');
	PERFORM dblink_exec('a', 'REASSIGN OWNED BY cpht_cat_owner TO cpht_cat_heir');
	RETURN NEXT is((SELECT owner::text FROM cpht_shared_tables WHERE name = 'cat_a'), 'cpht_cat_heir',
				   'REASSIGN OWNED updates it');
	PERFORM dblink_exec('a', 'DROP OWNED BY cpht_cat_heir');
	RETURN NEXT is(pg_temp.row_of('cat_a'), 'none', 'DROP OWNED deletes it');
	PERFORM dblink_exec('a', 'DROP OWNED BY cpht_cat_owner');
	PERFORM dblink_exec('a', 'DROP ROLE cpht_cat_owner');
	PERFORM dblink_exec('a', 'DROP ROLE cpht_cat_heir');

	PERFORM pg_temp.remote('a', 'SELECT cpht_drop(''cat_r'')');
	PERFORM pg_temp.remote('a', 'SELECT cpht_drop(''cat_r2'')');
	PERFORM pg_temp.remote('a', 'SELECT cpht_drop(''cat_r3'')');
	PERFORM dblink_disconnect('a');
END $$;
SELECT * FROM pg_temp.shared_tests();

SELECT * FROM finish();
ROLLBACK;
