-- The extension installs into a preloaded server, and its settings are visible.
CREATE EXTENSION slotted_counter;
SHOW slotted_counter.max_entries;
SELECT name, setting, unit, context FROM pg_settings WHERE name LIKE 'slotted_counter.%' ORDER BY name;
\dx slotted_counter
-- For the tests of attachments, which run after a flush in a worker of their own:
-- Flushes and waits (10 s at most) until every attachment due at the call has had a run after it.
CREATE FUNCTION attached() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  since timestamptz := clock_timestamp();
BEGIN
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
