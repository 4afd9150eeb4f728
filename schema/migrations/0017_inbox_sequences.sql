-- The consumer's side of the per-key sequences of migration 0016 (issue 41): a
-- sequence guard that applies a key's events once each and in order, and keeps
-- whatever arrives early until its turn (docs/CONSUMER.md, "Sequence guard").
--
--   inbox_key_sequences  per consumer and ordering key, the last sequence applied
--                        (in the same transaction as the effect) and since when a
--                        later one waits for a missing one (the gap).
--   inbox_held           messages that arrived before their turn: acked off the
--                        broker and kept here, in the consumer's database, until the
--                        sequence before them is applied. Nothing is lost with a
--                        queue purge or a consumer crash once it is here.
--   inbox_sequence()     the rule, for consumers in any language: 'apply' (the next
--                        one: do the effect in this transaction), 'duplicate' (at or
--                        below the last applied: skip it) or 'gap' (beyond the next:
--                        keep it until its turn, never apply it now).
--
-- Both tables are new and empty: nothing existing is locked or rewritten.
SET LOCAL lock_timeout = '10s';

CREATE TABLE {{schema}}.inbox_key_sequences (
  consumer     text        NOT NULL CHECK (consumer ~ '^[A-Za-z0-9_.:-]{1,200}$'),
  ordering_key text        NOT NULL CHECK (ordering_key <> ''),
  -- 0 until the key's first event (sequence 1) is applied.
  last_seq     bigint      NOT NULL CHECK (last_seq >= 0),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  -- Set while an event beyond last_seq + 1 waits (held) for a missing one: when the
  -- oldest such event arrived. NULL when nothing waits for a missing sequence.
  gap_since    timestamptz,
  CONSTRAINT inbox_key_sequences_pkey PRIMARY KEY (consumer, ordering_key)
);
-- The keys that wait, for the consumer's status and the audit, without a scan.
CREATE INDEX inbox_key_sequences_gaps ON {{schema}}.inbox_key_sequences (consumer, gap_since)
  WHERE gap_since IS NOT NULL;

CREATE TABLE {{schema}}.inbox_held (
  consumer       text        NOT NULL,
  ordering_key   text        NOT NULL,
  key_seq        bigint      NOT NULL CHECK (key_seq > 0),
  message_id     uuid        NOT NULL,
  message_type   text,
  exchange       text        NOT NULL DEFAULT '',
  routing_key    text        NOT NULL DEFAULT '',
  content_type   text,
  correlation_id text,
  -- The message's application headers as the SDK's Delivery holds them (string
  -- values), a JSON object in UTF-8 bytes: bytea, because a header may hold bytes
  -- (a NUL) that jsonb refuses. Then its AMQP timestamp.
  headers        bytea       NOT NULL DEFAULT '\x7b7d',
  sent_at        timestamptz,
  body           bytea       NOT NULL,
  received_at    timestamptz NOT NULL DEFAULT now(),
  -- Failed tries of the handler once its turn came; after the consumer's
  -- max_attempts it is tried no more (next_try_at infinity) and the key stays held
  -- until an operator acts (docs/CONSUMER.md, "Sequence guard").
  attempts       integer     NOT NULL DEFAULT 0,
  last_error     text,
  next_try_at    timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT inbox_held_pkey PRIMARY KEY (consumer, ordering_key, key_seq),
  CONSTRAINT inbox_held_key FOREIGN KEY (consumer, ordering_key)
    REFERENCES {{schema}}.inbox_key_sequences (consumer, ordering_key)
);

-- The rule. SECURITY INVOKER: the caller needs SELECT, INSERT and UPDATE on
-- inbox_key_sequences and SELECT and DELETE on inbox_held (schema/roles.sql grants
-- them to the consumer role, limited to its own consumer names like the inbox). Call it first in the transaction that
-- performs the effect: it locks the key's row until that transaction ends, so two
-- workers of one consumer never apply one key's events at once, and a rollback
-- takes the advance back with the effect.
CREATE FUNCTION {{schema}}.inbox_sequence(consumer text, ordering_key text, seq bigint,
                                          OUT outcome text, OUT last_applied bigint,
                                          OUT waiting_since timestamptz, OUT next_held boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
  IF consumer IS NULL OR consumer !~ '^[A-Za-z0-9_.:-]{1,200}$' THEN
    PERFORM {{schema}}.outbox_refuse('inbox_sequence', 'consumer',
      format('%s is not a consumer name (1-200 of [A-Za-z0-9_.:-])', coalesce(quote_literal(left(consumer, 80)), 'NULL')));
  END IF;
  IF ordering_key IS NULL OR ordering_key = '' THEN
    PERFORM {{schema}}.outbox_refuse('inbox_sequence', 'ordering_key', 'must be a non-empty key');
  END IF;
  IF seq IS NULL OR seq < 1 THEN
    PERFORM {{schema}}.outbox_refuse('inbox_sequence', 'seq', format('is %s, sequences start at 1', coalesce(seq::text, 'NULL')));
  END IF;
  next_held := false;
  -- The key's row exists from its first event on; a concurrent first insert waits
  -- for the other transaction, then finds its row. NO KEY UPDATE: inbox_held's
  -- foreign key (KEY SHARE) does not wait for it.
  INSERT INTO {{schema}}.inbox_key_sequences AS s (consumer, ordering_key, last_seq)
  VALUES (consumer, ordering_key, 0) ON CONFLICT ON CONSTRAINT inbox_key_sequences_pkey DO NOTHING;
  SELECT s.last_seq, s.gap_since INTO last_applied, waiting_since
    FROM {{schema}}.inbox_key_sequences s
   WHERE s.consumer = consumer AND s.ordering_key = ordering_key FOR NO KEY UPDATE;
  IF seq <= last_applied THEN
    outcome := 'duplicate';
  ELSIF seq = last_applied + 1 THEN
    outcome := 'apply';
    last_applied := seq;
    -- The next one already here (held): its turn comes with this commit. Otherwise a
    -- held event beyond it still waits for a missing one: since when.
    next_held := EXISTS (SELECT FROM {{schema}}.inbox_held n WHERE n.consumer = consumer
                          AND n.ordering_key = ordering_key AND n.key_seq = seq + 1);
    waiting_since := NULL;
    IF NOT next_held THEN
      SELECT min(h.received_at) INTO waiting_since FROM {{schema}}.inbox_held h
       WHERE h.consumer = consumer AND h.ordering_key = ordering_key AND h.key_seq > seq + 1;
    END IF;
    UPDATE {{schema}}.inbox_key_sequences s SET last_seq = seq, updated_at = now(), gap_since = waiting_since
     WHERE s.consumer = consumer AND s.ordering_key = ordering_key;
    -- A held copy of this event goes with its apply: it came early and was held,
    -- then came again in its turn (the broker redelivers what a lost connection
    -- never saw acked). Left behind, it could never be applied (its turn is past)
    -- and would wait in inbox_held for ever.
    DELETE FROM {{schema}}.inbox_held h
     WHERE h.consumer = consumer AND h.ordering_key = ordering_key AND h.key_seq <= seq;
  ELSE
    outcome := 'gap';
    IF waiting_since IS NULL THEN
      waiting_since := now();
      UPDATE {{schema}}.inbox_key_sequences s SET gap_since = waiting_since
       WHERE s.consumer = consumer AND s.ordering_key = ordering_key;
    END IF;
  END IF;
END
$$;
GRANT EXECUTE ON FUNCTION {{schema}}.inbox_sequence(text, text, bigint) TO PUBLIC;
