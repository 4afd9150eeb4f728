-- Subject keys a producer login cannot poison (issue 40, finding 1).
--
-- A producer must be able to create a subject's key (the first event about a
-- customer), so it may INSERT into outbox_subject_keys; the server cannot check that
-- the wrapped key it inserts is sound (that needs the master key, which the database
-- never holds). Before this, one login inserting garbage for customer-3 made every
-- later event about customer-3 fail in every producer: their business transactions
-- aborted. From now on:
--
--   created_by   records the login (session_user) that created each key, set by a
--                trigger whatever the INSERT says, so it cannot be forged. Rows made
--                before this migration have none (NULL: unknown).
--   outbox_subject_keys_superseded
--                keeps every key taken out of use. Nothing is deleted: a key that
--                was in fact sound (superseded by a hostile login, or by a producer
--                whose keyring is wrong) still decrypts the events sealed with it,
--                is rewrapped at rotation and destroyed by an erasure like the
--                current one.
--   supersede_subject_key(subject, key_id, new_key_id, wrapping_key_id, wrapped_key)
--                SECURITY DEFINER: moves the subject's current key `key_id` to the
--                superseded table and stores the caller's new key in its place, in
--                one statement's lock. The producer SDK calls it when the current key
--                does not verify under its keyring and was created by another login
--                (or before this migration): the row is not its own, so the event
--                goes on under a fresh key instead of aborting. It refuses (returns
--                false) when the row is no longer that key, was erased, or was
--                created by the caller: a producer whose own key does not verify is
--                at fault itself, and gets an error.
SET LOCAL lock_timeout = '10s';

-- NULL for the existing rows (added without a default, so no row is rewritten), then
-- the default and the trigger for every new one.
ALTER TABLE {{schema}}.outbox_subject_keys ADD COLUMN created_by text;
ALTER TABLE {{schema}}.outbox_subject_keys ALTER COLUMN created_by SET DEFAULT session_user;

CREATE FUNCTION {{schema}}.outbox_subject_key_created_by() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  -- session_user: the login, also inside a SECURITY DEFINER function.
  NEW.created_by := session_user;
  RETURN NEW;
END
$$;
CREATE TRIGGER outbox_subject_key_created_by BEFORE INSERT ON {{schema}}.outbox_subject_keys
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.outbox_subject_key_created_by();

CREATE TABLE {{schema}}.outbox_subject_keys_superseded (
  key_id           text        PRIMARY KEY,
  subject          text        NOT NULL,
  wrapping_key_id  text,
  wrapped_key      bytea,
  created_at       timestamptz NOT NULL,
  created_by       text,
  erased_at        timestamptz,
  superseded_at    timestamptz NOT NULL DEFAULT now(),
  superseded_by    text        NOT NULL,
  CHECK ((erased_at IS NULL) = (wrapped_key IS NOT NULL)),
  CHECK ((wrapped_key IS NULL) = (wrapping_key_id IS NULL))
);
CREATE INDEX outbox_subject_keys_superseded_subject ON {{schema}}.outbox_subject_keys_superseded (subject);

CREATE FUNCTION {{schema}}.supersede_subject_key(p_subject text, p_key_id text, p_new_key_id text,
                                                 p_wrapping_key_id text, p_wrapped_key bytea)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  moved integer;
BEGIN
  IF p_new_key_id IS NULL OR p_wrapping_key_id IS NULL OR p_wrapped_key IS NULL THEN
    RAISE EXCEPTION '%.supersede_subject_key: the new key, its id and its master key id are required',
      btrim('{{schema}}', '"') USING ERRCODE = '22023';
  END IF;
  WITH old AS (
    DELETE FROM {{schema}}.outbox_subject_keys k
     WHERE k.subject = p_subject AND k.key_id = p_key_id AND k.wrapped_key IS NOT NULL
       AND k.created_by IS DISTINCT FROM session_user
    RETURNING k.*)
  INSERT INTO {{schema}}.outbox_subject_keys_superseded
         (key_id, subject, wrapping_key_id, wrapped_key, created_at, created_by, superseded_by)
  SELECT key_id, subject, wrapping_key_id, wrapped_key, created_at, created_by, session_user FROM old;
  GET DIAGNOSTICS moved = ROW_COUNT;
  IF moved = 0 THEN
    RETURN false;
  END IF;
  INSERT INTO {{schema}}.outbox_subject_keys (subject, key_id, wrapping_key_id, wrapped_key)
  VALUES (p_subject, p_new_key_id, p_wrapping_key_id, p_wrapped_key);
  RETURN true;
END
$$;
REVOKE ALL ON FUNCTION {{schema}}.supersede_subject_key(text, text, text, text, bytea) FROM PUBLIC;

-- Whoever may create subject keys may supersede a foreign one, and whoever may read
-- them may read the superseded ones (roles.sql grants both from now on): producers
-- and decrypting consumers upgraded before the grants are run again keep working.
DO $$
DECLARE
  grantee oid;
BEGIN
  FOR grantee IN
    SELECT DISTINCT a.grantee FROM pg_attribute att, aclexplode(att.attacl) a
     WHERE att.attrelid = '{{schema}}.outbox_subject_keys'::regclass AND att.attname = 'subject'
       AND a.privilege_type = 'INSERT' AND a.grantee <> 0
    UNION
    SELECT a.grantee FROM pg_class c, aclexplode(c.relacl) a
     WHERE c.oid = '{{schema}}.outbox_subject_keys'::regclass AND a.privilege_type = 'INSERT' AND a.grantee <> 0
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION {{schema}}.supersede_subject_key(text, text, text, text, bytea) TO %s',
                   grantee::regrole);
  END LOOP;
  FOR grantee IN
    SELECT a.grantee FROM pg_class c, aclexplode(c.relacl) a
     WHERE c.oid = '{{schema}}.outbox_subject_keys'::regclass AND a.privilege_type = 'SELECT' AND a.grantee <> 0
  LOOP
    EXECUTE format('GRANT SELECT ON {{schema}}.outbox_subject_keys_superseded TO %s', grantee::regrole);
  END LOOP;
END $$;
