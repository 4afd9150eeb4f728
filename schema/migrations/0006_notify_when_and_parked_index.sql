-- Two changes measured by outbox-bench (docs/PERFORMANCE.md); 0004 stays as it was
-- released, so a schema migrated before gets them too.
--
-- 1. The notify trigger of 0004 tries the waiting relay's lock in its WHEN clause,
--    so the common case (no relay waiting: the relays are busy) runs no PL/pgSQL at
--    all. The protocol is unchanged: a relay that waits holds the session advisory
--    lock (1868724338, hashtext(schema)) in exclusive mode; a producer's try for it in
--    shared mode fails exactly then, and only then does the insert notify.
--    {{schema}} is the quoted identifier ([a-z_][a-z0-9_]*); the key hashes the bare name.
CREATE OR REPLACE FUNCTION {{schema}}.outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify(left('outbox_' || TG_TABLE_SCHEMA, 63), '');
  RETURN NULL;
END
$$;

DROP TRIGGER outbox_notify ON {{schema}}.outbox;
CREATE TRIGGER outbox_notify AFTER INSERT ON {{schema}}.outbox
  FOR EACH STATEMENT
  WHEN (NOT pg_try_advisory_xact_lock_shared(1868724338, hashtext(btrim('{{schema}}', '"'))))
  EXECUTE FUNCTION {{schema}}.outbox_notify();

-- 2. Parked rows are few; the relay's summary (every relay.summary_interval_s),
--    `status` and `dead list` count or list them. Without this index each of those
--    reads the whole table, published history included: seconds of CPU at ten
--    million rows. New and published rows never enter it.
--    Built without blocking producers on a live table (outside the migration's
--    transaction, before the rest of it; docs/UPGRADING.md).
-- outbox-migrate: concurrently index=outbox_parked_idx table=outbox
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_parked_idx ON {{schema}}.outbox (id) WHERE parked_at IS NOT NULL;
