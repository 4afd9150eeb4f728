-- A gapless sequence per ordering key (issue 41): the n-th row committed with an
-- ordering key gets key_seq n (1, 2, 3, ... per key), assigned in the producer's own
-- transaction by the trigger below, whoever writes the row (the C++ SDK, enqueue(),
-- a plain INSERT). The relay sends it as the header x-outbox-seq, with the key as
-- x-outbox-key, so a consumer can prove per key that it applied every event once and
-- in order (docs/SQL-CONTRACT.md, "Sequences").
--
--   * Gapless: the key's counter row is updated in the producer's transaction, so a
--     rollback takes the number back with the row.
--   * Commit order is sequence order for one key: the counter row stays locked until
--     the producer's transaction ends, so a second producer of the same key waits for
--     the first to commit or roll back. Different keys never wait for each other. A
--     transaction that writes several keys takes their locks in the order it writes
--     them: two transactions writing the same keys in opposite orders can deadlock
--     (PostgreSQL aborts one; retry it), as with any row lock.
--   * Rows without an ordering key have no sequence (NULL), nor have rows written
--     before this migration: the relay sends the headers only with a sequence.
--   * The number cannot be chosen: a value given to INSERT is replaced, and an UPDATE
--     that changes key_seq or ordering_key is refused (schema/roles.sql grants neither
--     column to producers or relays anyway).
--   * The counters are one row per key ever used (outbox_key_sequences), never pruned:
--     a key whose counter row is deleted starts again at 1, which a consumer's guard
--     reports as a sequence gone back instead of applying. Only the schema's owner can
--     touch the table.
SET LOCAL lock_timeout = '10s';

-- No default: adding the column rewrites nothing, whatever the table's size.
ALTER TABLE {{schema}}.outbox ADD COLUMN key_seq bigint;

CREATE TABLE {{schema}}.outbox_key_sequences (
  ordering_key text        PRIMARY KEY,
  last_seq     bigint      NOT NULL CHECK (last_seq > 0),
  updated_at   timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON {{schema}}.outbox_key_sequences FROM PUBLIC;

-- SECURITY DEFINER: producers need no privilege on the counters (roles.sql grants
-- them none), and cannot write a number of their own. Fixed search_path, as every
-- function of the contract.
CREATE FUNCTION {{schema}}.outbox_key_seq_assign() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NEW.ordering_key = '' THEN
    NEW.key_seq := NULL;  -- a number written by hand on a row without a key
    RETURN NEW;
  END IF;
  INSERT INTO {{schema}}.outbox_key_sequences AS s (ordering_key, last_seq)
  VALUES (NEW.ordering_key, 1)
  ON CONFLICT (ordering_key) DO UPDATE SET last_seq = s.last_seq + 1, updated_at = now()
  RETURNING s.last_seq INTO NEW.key_seq;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION {{schema}}.outbox_key_seq_assign() FROM PUBLIC;

CREATE FUNCTION {{schema}}.outbox_key_seq_keep() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RAISE EXCEPTION 'outbox row %: key_seq and ordering_key are assigned at enqueue and cannot change', OLD.id
    USING ERRCODE = '55000', COLUMN = 'key_seq',
          HINT = 'the sequence is the consumers'' proof of order: re-enqueue the event instead';
END
$$;

-- BEFORE INSERT, per row. The WHEN clause skips rows without a key (and without a
-- hand-written number): producers of unkeyed rows run no PL/pgSQL for it.
CREATE TRIGGER outbox_key_seq BEFORE INSERT ON {{schema}}.outbox
  FOR EACH ROW WHEN (NEW.ordering_key <> '' OR NEW.key_seq IS NOT NULL)
  EXECUTE FUNCTION {{schema}}.outbox_key_seq_assign();
CREATE TRIGGER outbox_key_seq_keep BEFORE UPDATE OF key_seq, ordering_key ON {{schema}}.outbox
  FOR EACH ROW WHEN (NEW.key_seq IS DISTINCT FROM OLD.key_seq OR NEW.ordering_key IS DISTINCT FROM OLD.ordering_key)
  EXECUTE FUNCTION {{schema}}.outbox_key_seq_keep();
