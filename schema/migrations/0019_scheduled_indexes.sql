-- The relay's claim indexes for scheduled delivery (0018). The claim takes due
-- scheduled rows by deliver_at, then ready rows by id; each through its own partial
-- index, so rows scheduled far ahead are never read by a claim before they are due
-- (through outbox_pending_idx, every claim would step over all of them).
-- outbox_pending_idx stays: a relay of an earlier release claims through it during a
-- rolling upgrade (docs/UPGRADING.md).
--
-- Built without blocking producers on a live table (the migrator runs the marked
-- statements outside its transaction; docs/UPGRADING.md).
-- outbox-migrate: concurrently index=outbox_ready_idx table=outbox
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_ready_idx ON {{schema}}.outbox (id)
  WHERE published_at IS NULL AND parked_at IS NULL AND deliver_at IS NULL;
-- outbox-migrate: concurrently index=outbox_scheduled_idx table=outbox
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_scheduled_idx ON {{schema}}.outbox (deliver_at, id)
  WHERE published_at IS NULL AND parked_at IS NULL AND deliver_at IS NOT NULL;
