-- The SQL contract of 0008 (docs/SQL-CONTRACT.md) refuses what the C++ SDK refuses,
-- with its own error (SQLSTATE 22023, the argument named in the message and as the
-- error's column field), in cases 0008 let through:
--   * enqueue(max_payload_bytes => NULL) skipped the payload size check (octet_length
--     > NULL is NULL, not true): a NULL limit is refused, and so is a negative one;
--   * a traceparent longer than a header value may be (4096 bytes; one of a future
--     version may be longer than 55 characters) failed the INSERT with the table's
--     23514 instead: outbox_check_trace measures it first;
--   * the nil and the max UUID (00000000-... and ffffffff-...) were taken as a
--     message_id by enqueue and inbox_record: sentinels that name no message (an
--     inbox takes every later message carrying one for a duplicate). The SDKs refuse
--     them (MessageId::parse_distinct); so does outbox_check_message_id now.
--
-- Same signatures and argument names as 0008 (CREATE OR REPLACE keeps the grants of
-- schema/roles.sql); the table is not touched, so this takes no lock on it.
SET LOCAL lock_timeout = '10s';

-- A message id given to a message or read from one, as MessageId::parse_distinct:
-- not the nil or the max UUID (RFC 9562 sections 5.9 and 5.10). NULL passes (the
-- callers decide what a missing id means).
CREATE FUNCTION {{schema}}.outbox_check_message_id(fn text, arg text, id uuid) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF id IN ('00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff') THEN
    PERFORM {{schema}}.outbox_refuse(fn, arg,
      format('is the %s UUID %L, which names no message: an inbox would take every later message carrying it '
             'for a duplicate', CASE WHEN id = '00000000-0000-0000-0000-000000000000' THEN 'nil' ELSE 'max' END, id));
  END IF;
END
$$;

-- Callable by any role, as 0008's helpers: enqueue and inbox_record are SECURITY
-- INVOKER, so their callers need EXECUTE on it too.
GRANT EXECUTE ON FUNCTION {{schema}}.outbox_check_message_id(text, text, uuid) TO PUBLIC;

-- 0008's enqueue, with the limit checked before the payload is measured against it
-- and a given message_id checked.
CREATE OR REPLACE FUNCTION {{schema}}.enqueue(
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
    max_payload_bytes integer DEFAULT 1048576)
RETURNS uuid LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
  id  uuid := coalesce(message_id, {{schema}}.uuid_v7());
  all_headers jsonb := coalesce(headers, '{}');
BEGIN
  PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'exchange', exchange, true);
  PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'routing_key', routing_key, true);
  PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'message_type', message_type, true);
  PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'ordering_key', coalesce(ordering_key, ''), false);
  PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'content_type', content_type, true);
  IF correlation_id IS NOT NULL THEN
    PERFORM {{schema}}.outbox_check_shortstr('enqueue', 'correlation_id', correlation_id, true);
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
  INSERT INTO {{schema}}.outbox (message_id, exchange, routing_key, message_type, ordering_key,
                                 content_type, headers, correlation_id, payload)
  VALUES (id, exchange, routing_key, message_type, coalesce(ordering_key, ''), content_type,
          all_headers, correlation_id, payload);
  RETURN id;
END
$$;

-- 0008's outbox_check_trace, with the length checked first: a traceparent of a
-- future version may be longer than 55 characters, and one past a header value's
-- 4096 bytes passed 0008's pattern, then failed the INSERT on the table's rule
-- outbox_header_values (23514) instead of naming the argument.
CREATE OR REPLACE FUNCTION {{schema}}.outbox_check_trace(traceparent text, tracestate text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  member text;
  keys   text[] := '{}';
BEGIN
  IF traceparent IS NULL THEN
    IF tracestate IS NOT NULL THEN
      PERFORM {{schema}}.outbox_refuse('enqueue', 'tracestate', 'needs a traceparent');
    END IF;
    RETURN;
  END IF;
  IF octet_length(traceparent) > 4096 THEN
    PERFORM {{schema}}.outbox_refuse('enqueue', 'traceparent',
      format('is %s bytes, the limit is 4096 (a header value''s)', octet_length(traceparent)));
  END IF;
  IF traceparent !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-.*)?$'
     OR left(traceparent, 2) = 'ff' OR (left(traceparent, 2) = '00' AND length(traceparent) <> 55)
     OR substr(traceparent, 4, 32) = repeat('0', 32) OR substr(traceparent, 37, 16) = repeat('0', 16) THEN
    PERFORM {{schema}}.outbox_refuse('enqueue', 'traceparent',
      'is not a W3C traceparent (00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, ids not all zeros)');
  END IF;
  IF tracestate IS NULL THEN
    RETURN;
  END IF;
  IF octet_length(tracestate) > 512 THEN
    PERFORM {{schema}}.outbox_refuse('enqueue', 'tracestate',
      format('is %s bytes, the limit is 512', octet_length(tracestate)));
  END IF;
  FOREACH member IN ARRAY string_to_array(tracestate, ',') LOOP
    member := btrim(member, E' \t');
    CONTINUE WHEN member = '';
    IF member !~ '^([a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$' THEN
      PERFORM {{schema}}.outbox_refuse('enqueue', 'tracestate',
        format('member %L is not a valid key=value list member', left(member, 64)));
    END IF;
    IF split_part(member, '=', 1) = ANY (keys) THEN
      PERFORM {{schema}}.outbox_refuse('enqueue', 'tracestate',
        format('key %L appears twice', split_part(member, '=', 1)));
    END IF;
    keys := keys || split_part(member, '=', 1);
    IF cardinality(keys) > 32 THEN
      PERFORM {{schema}}.outbox_refuse('enqueue', 'tracestate', 'has more than 32 list members');
    END IF;
  END LOOP;
END
$$;

-- 0008's inbox_record, with the message id checked: a sentinel id would make every
-- later message carrying it a duplicate of the first.
CREATE OR REPLACE FUNCTION {{schema}}.inbox_record(message_id uuid, consumer text, message_type text DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
  inserted integer;
BEGIN
  IF message_id IS NULL THEN
    PERFORM {{schema}}.outbox_refuse('inbox_record', 'message_id', 'must not be null');
  END IF;
  PERFORM {{schema}}.outbox_check_message_id('inbox_record', 'message_id', message_id);
  IF consumer IS NULL OR consumer !~ '^[A-Za-z0-9_.:-]{1,200}$' THEN
    PERFORM {{schema}}.outbox_refuse('inbox_record', 'consumer',
      format('%s is not a consumer name (1-200 of [A-Za-z0-9_.:-])', coalesce(quote_literal(left(consumer, 80)), 'NULL')));
  END IF;
  INSERT INTO {{schema}}.inbox (message_id, consumer, message_type)
  VALUES (message_id, consumer, nullif(message_type, ''))
  ON CONFLICT ON CONSTRAINT inbox_pkey DO NOTHING;
  GET DIAGNOSTICS inserted = ROW_COUNT;
  RETURN inserted = 1;
END
$$;
