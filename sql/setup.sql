-- The extension installs into a preloaded server, and its settings are visible.
CREATE EXTENSION slotted_counter;
SHOW slotted_counter.max_entries;
SELECT name, setting, unit, context FROM pg_settings WHERE name LIKE 'slotted_counter.%' ORDER BY name;
\dx slotted_counter
