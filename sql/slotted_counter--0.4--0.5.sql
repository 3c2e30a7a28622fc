-- slotted_counter 0.4 -> 0.5: totals leaves room on each page for a new version of its rows.
\echo Use "ALTER EXTENSION slotted_counter UPDATE TO '0.5'" to load this file. \quit

-- A flush updates every dirty key's row once. With full pages (fillfactor 100) each update puts
-- the new version on another page and adds an index entry; with half of each page free the new
-- version stays on its page (a HOT update: no index entry), and the next access prunes the old
-- one. A flush of 1,000,000 keys that already have rows takes about half the time; the table
-- takes up to twice the pages. Rows written before the update move to the roomier pages as they
-- are updated (or at once with VACUUM FULL slotted_counter.totals, which locks the table).
ALTER TABLE slotted_counter.totals SET (fillfactor = 50);
