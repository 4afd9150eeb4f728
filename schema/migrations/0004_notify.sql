-- Wakes an idle relay as soon as a producer inserts (relay.listen): one NOTIFY per
-- INSERT statement on the outbox, sent only while a relay waits for it.
--
-- NOTIFY serialises the commits of notifying transactions (it holds a database-wide
-- lock through the commit's WAL flush), which halves the rate of many concurrent
-- producers. So a relay that waits holds the session advisory lock
-- (1868724338, hashtext(schema)) in exclusive mode; a producer's try for it in shared
-- mode fails exactly then, and only then does it notify. A busy relay claims again
-- after each batch anyway and needs no notification.
--
-- The shared lock a producer gets is held until its transaction ends. A relay that
-- gets the exclusive lock therefore knows that every insert made without a
-- notification has committed (or rolled back), claims once more, then sleeps.
-- The relay's channel is left('outbox_' || schema, 63).
CREATE FUNCTION {{schema}}.outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT pg_try_advisory_xact_lock_shared(1868724338, hashtext(TG_TABLE_SCHEMA)) THEN
    PERFORM pg_notify(left('outbox_' || TG_TABLE_SCHEMA, 63), '');
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER outbox_notify AFTER INSERT ON {{schema}}.outbox
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.outbox_notify();
