-- Scheduled delivery (issue 41): a producer says "publish this at 14:00" in its own
-- transaction. deliver_at is when the row becomes due; NULL (every row before this
-- migration, and the default) is "at once". The relay publishes a scheduled row at or
-- after deliver_at, woken by a timer for the earliest one (docs/SQL-CONTRACT.md,
-- "Scheduled delivery"):
--
--   * A deliver_at in the past is due at once; 'infinity' and '-infinity' are refused
--     (no point in time). A far one (9999) waits that long, counted in the relay's
--     scheduled backlog.
--   * next_attempt_at follows deliver_at (the trigger below): every reader that
--     already waits for next_attempt_at (a relay of an earlier release during a
--     rolling upgrade, the per_key walk, status) waits for deliver_at too.
--   * With per_key ordering a scheduled row holds back the later rows of its key
--     until it is published: a key's events go in sequence order (0016).
--   * Migration 0019 builds the relay's two claim indexes (ready, scheduled), outside
--     a transaction; until then the relay claims correctly, through the older index.
SET LOCAL lock_timeout = '10s';

-- No default: adding the column rewrites nothing, whatever the table's size. NOT
-- VALID: the column is NULL in every existing row, so there is nothing to check, and
-- no scan under this migration's lock; new and updated rows are checked.
ALTER TABLE {{schema}}.outbox ADD COLUMN deliver_at timestamptz;
ALTER TABLE {{schema}}.outbox ADD CONSTRAINT outbox_deliver_at_finite
  CHECK (deliver_at IS NULL OR isfinite(deliver_at)) NOT VALID;

-- A new row waits for its deliver_at (a given next_attempt_at later still counts);
-- a changed deliver_at (the schema owner rescheduling a row: producers have no
-- UPDATE) is the row's new due time, NULL meaning now.
CREATE FUNCTION {{schema}}.outbox_deliver_at() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    NEW.next_attempt_at := greatest(NEW.next_attempt_at, NEW.deliver_at);
  ELSE
    NEW.next_attempt_at := coalesce(NEW.deliver_at, now());
  END IF;
  RETURN NEW;
END
$$;
-- WHEN: rows without a deliver_at (almost all) run no PL/pgSQL for it.
CREATE TRIGGER outbox_deliver_at BEFORE INSERT ON {{schema}}.outbox
  FOR EACH ROW WHEN (NEW.deliver_at IS NOT NULL)
  EXECUTE FUNCTION {{schema}}.outbox_deliver_at();
CREATE TRIGGER outbox_deliver_at_changed BEFORE UPDATE OF deliver_at ON {{schema}}.outbox
  FOR EACH ROW WHEN (NEW.deliver_at IS DISTINCT FROM OLD.deliver_at)
  EXECUTE FUNCTION {{schema}}.outbox_deliver_at();

-- enqueue() with deliver_at last, so every call written for the 12 arguments of 0015
-- means what it meant. Replaced, not overloaded: two versions would make a call that
-- leaves arguments out ambiguous. schema/roles.sql grants EXECUTE on this signature.
DROP FUNCTION {{schema}}.enqueue(text, text, text, bytea, jsonb, text, text, text, uuid, text, text, integer);
CREATE FUNCTION {{schema}}.enqueue(
    exchange          text,
    routing_key       text,
    message_type      text,
    payload           bytea,
    headers           jsonb   DEFAULT '{}',
    ordering_key      text    DEFAULT '',
    content_type      text    DEFAULT 'application/json',
    correlation_id    text    DEFAULT NULL,
    message_id        uuid    DEFAULT NULL,
    traceparent       text    DEFAULT NULL,
    tracestate        text    DEFAULT NULL,
    max_payload_bytes integer DEFAULT 1048576,
    deliver_at        timestamptz DEFAULT NULL)
RETURNS uuid LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
  id  uuid := coalesce(message_id, {{schema}}.uuid_v7());
  all_headers jsonb := coalesce(headers, '{}');
BEGIN
  PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'exchange', exchange, true);
  PERFORM {{schema}}.outbox_check_controls('enqueue', 'exchange', exchange);
  PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'routing_key', routing_key, true);
  PERFORM {{schema}}.outbox_check_controls('enqueue', 'routing_key', routing_key);
  PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'message_type', message_type, true);
  PERFORM {{schema}}.outbox_check_controls('enqueue', 'message_type', message_type);
  PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'ordering_key', coalesce(ordering_key, ''), false);
  PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'content_type', content_type, true);
  PERFORM {{schema}}.outbox_check_controls('enqueue', 'content_type', content_type);
  IF correlation_id IS NOT NULL THEN
    PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'correlation_id', correlation_id, true);
    PERFORM {{schema}}.outbox_check_controls('enqueue', 'correlation_id', correlation_id);
  END IF;
  PERFORM {{schema}}.outbox_check_message_id('enqueue', 'message_id', message_id);
  -- A NULL limit is a caller's mistake (a driver binding an unset variable), not "no
  -- limit": leave the argument out for the default.
  IF max_payload_bytes IS NULL THEN
    PERFORM {{schema}}.outbox_refuse('enqueue', 'max_payload_bytes',
      'must not be null (leave it out for the default, 1048576)');
  ELSIF max_payload_bytes < 0 THEN
    PERFORM {{schema}}.outbox_refuse('enqueue', 'max_payload_bytes',
      format('is %s, it must not be negative', max_payload_bytes));
  END IF;
  IF payload IS NULL THEN
    PERFORM {{schema}}.outbox_refuse('enqueue', 'payload', 'must not be null (an empty body is '''')');
  ELSIF octet_length(payload) > max_payload_bytes THEN
    PERFORM {{schema}}.outbox_refuse('enqueue', 'payload',
      format('is %s bytes, the limit is %s', octet_length(payload), max_payload_bytes));
  END IF;
  PERFORM {{schema}}.outbox_check_headers(all_headers);
  PERFORM {{schema}}.outbox_check_trace(traceparent, tracestate);
  IF traceparent IS NOT NULL THEN
    all_headers := all_headers || jsonb_build_object('traceparent', traceparent);
  END IF;
  IF tracestate IS NOT NULL THEN
    all_headers := all_headers || jsonb_build_object('tracestate', tracestate);
  END IF;
  PERFORM {{schema}}.outbox_check_headers_total(all_headers);
  IF deliver_at IS NOT NULL AND NOT isfinite(deliver_at) THEN
    PERFORM {{schema}}.outbox_refuse('enqueue', 'deliver_at',
      format('is %s, which is no point in time (leave it NULL to publish at once)', deliver_at));
  END IF;
  INSERT INTO {{schema}}.outbox (message_id, exchange, routing_key, message_type, ordering_key,
                                 content_type, headers, correlation_id, payload, deliver_at)
  VALUES (id, exchange, routing_key, message_type, coalesce(ordering_key, ''), content_type,
          all_headers, correlation_id, payload, deliver_at);
  RETURN id;
END
$$;
