-- per_key ordering: the relay finds each key's head (its lowest pending id) with
-- DISTINCT ON (ordering_key) ... ORDER BY ordering_key, id over pending rows.
--
-- Built without blocking producers on a live table (the migrator runs the marked
-- statement outside its transaction; docs/UPGRADING.md). The index is the one this
-- migration always built: a schema migrated before is not touched.
-- outbox-migrate: concurrently index=outbox_pending_key_idx table=outbox
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_pending_key_idx ON {{schema}}.outbox (ordering_key, id)
  WHERE published_at IS NULL;
