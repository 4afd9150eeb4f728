-- Crypto-shredding: one data key per data subject (e.g. per customer id), used to
-- encrypt that subject's sensitive fields. The key is stored only wrapped
-- (AES-256-GCM) by a master key from the keyring, never in clear. Erasing a subject
-- sets wrapped_key to NULL: from then on none of its fields can be decrypted,
-- wherever copies of the messages went. The row stays as a tombstone so that no
-- new key is minted for an erased subject. Run VACUUM on this table after
-- erasures: until then the old row version still holds the wrapped key on disk.
CREATE TABLE {{schema}}.outbox_subject_keys (
  subject          text        PRIMARY KEY CHECK (subject <> ''),
  -- Named in each envelope ("skid"); random, says nothing about the subject.
  key_id           text        NOT NULL UNIQUE,
  -- Id of the master key that wrapped this key; NULL once erased.
  wrapping_key_id  text,
  -- nonce (12) || ciphertext (32) || tag (16); NULL once erased.
  wrapped_key      bytea,
  created_at       timestamptz NOT NULL DEFAULT now(),
  erased_at        timestamptz,
  CHECK ((erased_at IS NULL) = (wrapped_key IS NOT NULL)),
  CHECK ((wrapped_key IS NULL) = (wrapping_key_id IS NULL))
);
