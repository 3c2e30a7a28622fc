-- The extension installs into a preloaded server, and its settings are visible.
CREATE EXTENSION slotted_counter;
SHOW slotted_counter.max_entries;
SELECT name, setting, unit, context FROM pg_settings WHERE name LIKE 'slotted_counter.%' ORDER BY name;
-- (the columns of \dx differ between versions of psql)
SELECT e.extname, e.extversion, n.nspname, obj_description(e.oid, 'pg_extension')
FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'slotted_counter';
-- key_values keeps room on its pages for the flusher's HOT updates (0.5)
SELECT reloptions FROM pg_class WHERE oid = 'slotted_counter.key_values'::regclass;
-- For the tests of attachments, which run after a flush in a worker of their own:
-- Flushes and waits (10 s at most) until every attachment due at the call has had a run after it.
CREATE FUNCTION attached() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  since timestamptz;
BEGIN
  -- From after a flush of everything counted so far: a run that starts later sees it.
  PERFORM sc_rollup();
  since := clock_timestamp();
  FOR i IN 1..500 LOOP
    PERFORM sc_rollup();
    IF NOT EXISTS (SELECT FROM slotted_counter.attachments
                   WHERE COALESCE(last_attempt, '-infinity') + every <= since) THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.02);
  END LOOP;
  RETURN false;
END $$;
-- Every function, type, table and view of the extension has a description (\df+, \dT+, \d+).
SELECT pg_describe_object(classid, objid, 0) AS undescribed
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'slotted_counter')
  AND classid IN ('pg_proc'::regclass, 'pg_type'::regclass, 'pg_class'::regclass)
  AND obj_description(objid, classid::regclass::name) IS NULL
  AND NOT (classid = 'pg_class'::regclass AND objid = 'slotted_counter.counters_id_seq'::regclass)
  -- array types, and the row types of tables and views (their relations have the description;
  -- PostgreSQL 17 and later list them as members of the extension)
  AND NOT (classid = 'pg_type'::regclass AND objid IN (SELECT typarray FROM pg_type
                                                       UNION ALL
                                                       SELECT oid FROM pg_type WHERE typrelid <> 0))
ORDER BY 1;
