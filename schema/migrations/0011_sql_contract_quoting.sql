-- The SQL contract's errors (docs/SQL-CONTRACT.md) quote the caller's value the way
-- the C++ SDK's do (outbox::quoted_value): every byte outside printable ASCII escaped
-- (\n, \r, \t, \xNN; \\ and \' so the quoting cannot be forged), at most 64 bytes
-- shown (80 of a consumer name), then "... (N bytes)". 0008 and 0010 quoted with %L,
-- which escapes quotes and backslashes only: a header name, a tracestate member or a
-- consumer name holding a newline, an ANSI escape or a bidi override put it raw into
-- the error message and its column field, so the caller's log line could be split or
-- forged. Rules, SQLSTATE and wording are unchanged; a value of printable ASCII reads
-- as before.
--
-- Same signatures and argument names as 0010 (CREATE OR REPLACE keeps the grants of
-- schema/roles.sql); the table is not touched, so this takes no lock on it.
SET LOCAL lock_timeout = '10s';

-- outbox::quoted_value in SQL. E'' literals: the escapes must not depend on the
-- session's standard_conforming_strings.
CREATE FUNCTION {{schema}}.outbox_quoted(value text, max_bytes integer DEFAULT 64) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  bytes bytea;
  shown integer;
  b     integer;
  out   text := '''';
BEGIN
  IF value IS NULL THEN
    RETURN 'NULL';
  END IF;
  bytes := convert_to(value, 'UTF8');
  shown := least(octet_length(bytes), greatest(max_bytes, 0));
  FOR i IN 0 .. shown - 1 LOOP
    b := get_byte(bytes, i);
    out := out || CASE
      WHEN b = 10 THEN E'\\n'
      WHEN b = 13 THEN E'\\r'
      WHEN b = 9 THEN E'\\t'
      WHEN b = 92 THEN E'\\\\'
      WHEN b = 39 THEN E'\\'''
      WHEN b < 32 OR b >= 127 THEN E'\\x' || lpad(to_hex(b), 2, '0')
      ELSE chr(b)
    END;
  END LOOP;
  out := out || '''';
  IF shown < octet_length(bytes) THEN
    out := out || format('... (%s bytes)', octet_length(bytes));
  END IF;
  RETURN out;
END
$$;

-- Callable by any role, as 0008's helpers: enqueue and inbox_record are SECURITY
-- INVOKER, so their callers need EXECUTE on it too.
GRANT EXECUTE ON FUNCTION {{schema}}.outbox_quoted(text, integer) TO PUBLIC;

-- 0008's outbox_check_headers, quoting the header name with outbox_quoted. The rules
-- in 0008's order, as one CASE: a header that passes costs no quoting.
CREATE OR REPLACE FUNCTION {{schema}}.outbox_check_headers(headers jsonb) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  name   text;
  kind   text;
  value  text;
  why    text;
BEGIN
  IF jsonb_typeof(headers) <> 'object' THEN
    PERFORM {{schema}}.outbox_refuse('enqueue', 'headers',
      format('must be a JSON object of string values, not a JSON %s', jsonb_typeof(headers)));
  END IF;
  FOR name, kind, value IN SELECT e.key, jsonb_typeof(e.value), e.value #>> '{}' FROM jsonb_each(headers) e LOOP
    why := CASE
      WHEN name !~ '^[A-Za-z0-9_.-]{1,128}$' THEN 'header name must be 1-128 characters of [A-Za-z0-9_.-]'
      WHEN name LIKE 'x-outbox-%' THEN 'is reserved: names starting with ''x-outbox-'' are the relay''s'
      WHEN name IN ('CC', 'BCC') THEN 'is reserved: RabbitMQ also routes the message to the routing keys it lists'
      WHEN name = 'x-death' OR name LIKE 'x-first-death-%' OR name LIKE 'x-last-death-%'
        THEN 'is reserved: RabbitMQ sets it when it dead-letters a message'
      WHEN name IN ('x-delivery-count', 'x-received-from', 'x-stream-offset', 'x-shovelled',
                    'x-shovelled-timestamp', 'x-mqtt-publish-qos') OR name LIKE 'x-amqp-1.0-%'
        THEN 'is reserved: RabbitMQ or one of its plugins sets it'
      WHEN name IN ('x-stream-filter-value', 'x-delay')
        THEN 'is reserved: RabbitMQ or one of its plugins interprets it on publish'
      WHEN name IN ('traceparent', 'tracestate')
        THEN format('is reserved: set the trace context with the %s argument', name)
      WHEN kind <> 'string' THEN format('must be a JSON string, not a JSON %s', kind)
      WHEN octet_length(value) > 4096 THEN format('is %s bytes, the limit is 4096', octet_length(value))
    END;
    IF why IS NOT NULL THEN
      PERFORM {{schema}}.outbox_refuse('enqueue', 'headers[' || {{schema}}.outbox_quoted(name) || ']', why);
    END IF;
  END LOOP;
END
$$;

-- 0010's outbox_check_trace, quoting a tracestate member or key with outbox_quoted.
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
        'member ' || {{schema}}.outbox_quoted(member) || ' is not a valid key=value list member');
    END IF;
    IF split_part(member, '=', 1) = ANY (keys) THEN
      PERFORM {{schema}}.outbox_refuse('enqueue', 'tracestate',
        'key ' || {{schema}}.outbox_quoted(split_part(member, '=', 1)) || ' appears twice');
    END IF;
    keys := keys || split_part(member, '=', 1);
    IF cardinality(keys) > 32 THEN
      PERFORM {{schema}}.outbox_refuse('enqueue', 'tracestate', 'has more than 32 list members');
    END IF;
  END LOOP;
END
$$;

-- 0010's inbox_record, quoting a refused consumer name with outbox_quoted.
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
      {{schema}}.outbox_quoted(consumer, 80) || ' is not a consumer name (1-200 of [A-Za-z0-9_.:-])');
  END IF;
  INSERT INTO {{schema}}.inbox (message_id, consumer, message_type)
  VALUES (message_id, consumer, nullif(message_type, ''))
  ON CONFLICT ON CONSTRAINT inbox_pkey DO NOTHING;
  GET DIAGNOSTICS inserted = ROW_COUNT;
  RETURN inserted = 1;
END
$$;
