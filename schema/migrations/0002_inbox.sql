-- The inbox: one row per (message, consumer) that a consumer has processed, written
-- in the consumer's own transaction before its effect (consumer_sdk, outbox::Inbox).
-- {{schema}} is replaced by the configured schema name (a validated identifier).
CREATE TABLE {{schema}}.inbox (
  -- The AMQP message_id (the outbox's UUIDv7), fixed for good by the producer.
  message_id    uuid        NOT NULL,
  -- Which consumer processed it: two consumers of one message must not skip each other.
  consumer      text        NOT NULL CHECK (consumer <> ''),
  -- For operators only; never part of the key.
  message_type  text,
  processed_at  timestamptz NOT NULL DEFAULT now(),
  -- Named on purpose: Inbox::record conflicts ON CONSTRAINT inbox_pkey only, so any
  -- other unique violation is raised as the error it is, never taken for a duplicate.
  CONSTRAINT inbox_pkey PRIMARY KEY (message_id, consumer)
);

-- Retention cleanup deletes the oldest rows in small batches by processed time.
CREATE INDEX inbox_processed_at_idx ON {{schema}}.inbox (processed_at);
