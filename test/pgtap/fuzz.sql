-- Differential fuzz: random find-or-put, find, delete, subtransactions
-- (savepoints) rolled back or released, commits, rollbacks, rebuilds and
-- drops, run
-- against cpht and against a reference model kept in an ordinary table.
-- Both are transactional, so after any mix of aborts they must agree.
--
-- Runs at top level (no BEGIN): the procedure commits and rolls back.
-- The number of operations per kind comes from the psql variable fuzz_ops
-- (pg_prove --set fuzz_ops=100000); CI runs a bounded number.
\set QUIET 1
\if :{?fuzz_ops}
\else
\set fuzz_ops 2000
\endif

SELECT plan(4);

CREATE TEMP TABLE fuzz_ref (id bigint PRIMARY KEY);
CREATE TEMP TABLE fuzz_state (h int);

-- One operation on table h; returns how many answers disagreed with the model.
CREATE FUNCTION pg_temp.fuzz_step(h int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	r float8 := random();
	keys bigint[];
	flags boolean[];
	got bigint[];
	bad int := 0;
BEGIN
	-- Batches of 1..300 keys from a pool of 4000, negative ones too,
	-- duplicates within the batch likely.
	keys := ARRAY(SELECT (floor(random() * 4000)::bigint - 2000) * 1000003
				  FROM generate_series(1, 1 + floor(random() * 300)::int));
	IF r < 0.35 THEN
		got := cpht_fop_new(h, keys);
		SELECT count(*) INTO bad FROM (
			(SELECT unnest(got) EXCEPT ALL (SELECT unnest(keys) EXCEPT SELECT id FROM fuzz_ref))
			UNION ALL
			((SELECT unnest(keys) EXCEPT SELECT id FROM fuzz_ref) EXCEPT ALL SELECT unnest(got))) d;
		INSERT INTO fuzz_ref SELECT DISTINCT unnest(keys) ON CONFLICT DO NOTHING;
	ELSIF r < 0.55 THEN
		-- true exactly once for each new key, never for an old one
		flags := cpht_fop(h, keys);
		SELECT count(*) INTO bad FROM (
			SELECT k, count(*) FILTER (WHERE f) AS trues,
				   bool_or(EXISTS (SELECT 1 FROM fuzz_ref WHERE id = k)) AS old
			FROM unnest(keys, flags) AS u(k, f) GROUP BY k) s
		WHERE trues <> CASE WHEN old THEN 0 ELSE 1 END;
		INSERT INTO fuzz_ref SELECT DISTINCT unnest(keys) ON CONFLICT DO NOTHING;
	ELSIF r < 0.75 THEN
		flags := cpht_find(h, keys);
		SELECT count(*) INTO bad FROM unnest(keys, flags) AS u(k, f)
		WHERE f IS DISTINCT FROM EXISTS (SELECT 1 FROM fuzz_ref WHERE id = k);
	ELSIF r < 0.92 THEN
		flags := cpht_delete(h, keys);
		SELECT count(*) INTO bad FROM (
			SELECT k, count(*) FILTER (WHERE f) AS trues,
				   bool_or(EXISTS (SELECT 1 FROM fuzz_ref WHERE id = k)) AS present
			FROM unnest(keys, flags) AS u(k, f) GROUP BY k) s
		WHERE trues <> CASE WHEN present THEN 1 ELSE 0 END;
		DELETE FROM fuzz_ref WHERE id = ANY (keys);
	ELSE
		SELECT count(*) INTO bad FROM (SELECT 1) x
		WHERE cpht_count(h) <> (SELECT count(*) FROM fuzz_ref);
	END IF;
	IF bad > 0 THEN
		RAISE WARNING 'fuzz mismatch: draw %, % wrong answers, batch %', r, bad, keys;
	END IF;
	RETURN bad;
END $$;

CREATE PROCEDURE pg_temp.fuzz(n_ops int, kind text, seed float8,
							  INOUT ops int DEFAULT 0, INOUT mismatches int DEFAULT 0,
							  INOUT aborted int DEFAULT 0)
LANGUAGE plpgsql AS $$
DECLARE
	r float8;
	h int;
BEGIN
	PERFORM setseed(seed);
	TRUNCATE fuzz_ref;
	DELETE FROM fuzz_state;
	INSERT INTO fuzz_state VALUES (cpht_create(20000, kind));
	COMMIT;
	WHILE ops < n_ops LOOP
		r := random();
		SELECT s.h INTO h FROM fuzz_state s;
		ops := ops + 1;
		IF r < 0.04 THEN
			COMMIT;
		ELSIF r < 0.07 THEN
			ROLLBACK;
			aborted := aborted + 1;
		ELSIF r < 0.075 THEN
			-- rebuild without tombstones: inside the transaction, so later
			-- rollbacks must cope with keys that moved
			PERFORM cpht_rebuild(h);
		ELSIF r < 0.085 THEN
			-- drop and recreate: also undone by a later rollback
			PERFORM cpht_drop(h);
			UPDATE fuzz_state SET h = cpht_create(20000, kind);
			TRUNCATE fuzz_ref;
		ELSIF r < 0.25 THEN
			-- a savepoint: a few operations, then released or rolled back
			DECLARE
				pending int := 0;
			BEGIN
				FOR i IN 1 .. 1 + floor(random() * 6)::int LOOP
					pending := pending + pg_temp.fuzz_step(h);
					ops := ops + 1;
				END LOOP;
				mismatches := mismatches + pending;
				IF random() < 0.5 THEN
					RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'fuzz rollback';
				END IF;
			EXCEPTION WHEN raise_exception THEN
				aborted := aborted + 1;
			END;
		ELSE
			mismatches := mismatches + pg_temp.fuzz_step(h);
		END IF;
	END LOOP;
	-- the final state, after everything
	SELECT s.h INTO h FROM fuzz_state s;
	IF cpht_count(h) <> (SELECT count(*) FROM fuzz_ref) THEN
		RAISE WARNING 'fuzz mismatch: final count % against %', cpht_count(h), (SELECT count(*) FROM fuzz_ref);
		mismatches := mismatches + 1;
	END IF;
	IF EXISTS (SELECT 1 FROM unnest(cpht_find(h, ARRAY(SELECT id FROM fuzz_ref))) f WHERE NOT f) THEN
		RAISE WARNING 'fuzz mismatch: final keys missing';
		mismatches := mismatches + 1;
	END IF;
	PERFORM cpht_drop(h);
	COMMIT;
END $$;

CALL pg_temp.fuzz(:fuzz_ops, 'iceberg', 0.42) \gset iceberg_
SELECT is(:iceberg_mismatches, 0,
		  format('iceberg: %s operations, %s aborted (sub)transactions, no mismatch',
				 :iceberg_ops, :iceberg_aborted));
SELECT cmp_ok(:iceberg_aborted, '>', 0, 'iceberg: the fuzz rolled back work');

CALL pg_temp.fuzz(:fuzz_ops, 'cuckoo', 0.17) \gset cuckoo_
SELECT is(:cuckoo_mismatches, 0,
		  format('cuckoo: %s operations, %s aborted (sub)transactions, no mismatch',
				 :cuckoo_ops, :cuckoo_aborted));
SELECT cmp_ok(:cuckoo_aborted, '>', 0, 'cuckoo: the fuzz rolled back work');

SELECT * FROM finish();
