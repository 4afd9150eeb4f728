-- The outbox: one row per event, written in the producer's own transaction.
-- {{schema}} is replaced by the configured schema name (a validated identifier).
CREATE TABLE {{schema}}.outbox (
  -- Claim order. Identity order is not commit order; the relay claims by state
  -- (pending), never by an "id > last seen" cursor, so a late commit is not skipped.
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- Assigned once at enqueue (UUIDv7) and sent as the AMQP message_id; never changes on retry.
  message_id       uuid        NOT NULL UNIQUE,
  exchange         text        NOT NULL CHECK (exchange <> ''),
  routing_key      text        NOT NULL CHECK (routing_key <> ''),
  message_type     text        NOT NULL CHECK (message_type <> ''),
  -- Aggregate id; empty when the producer gave none.
  ordering_key     text        NOT NULL DEFAULT '',
  content_type     text        NOT NULL DEFAULT 'application/json',
  -- String-to-string AMQP headers chosen by the producer.
  headers          jsonb       NOT NULL DEFAULT '{}'::jsonb,
  correlation_id   text,
  payload          bytea       NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  attempts         integer     NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  -- One line, no secrets, no payload.
  last_error       text,
  published_at     timestamptz,
  -- Set when attempts reached max_attempts: never claimed again until requeued.
  parked_at        timestamptz
);

-- The claim's index covers pending rows only: it stays small however many
-- published rows accumulate, so the claim does not slow down with history.
CREATE INDEX outbox_pending_idx ON {{schema}}.outbox (id)
  WHERE published_at IS NULL AND parked_at IS NULL;
