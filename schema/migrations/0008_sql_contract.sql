-- The SQL contract (docs/SQL-CONTRACT.md): producers and consumers in any language
-- use the outbox through these functions, inside their own transactions.
--
--   uuid_v7()          an RFC 9562 UUIDv7, increasing within a session; also the
--                      default of outbox.message_id from now on
--   enqueue(...)       validates a message as the C++ SDK does (validate_message,
--                      outbox/header_rules.h) and inserts its row; returns its id
--   inbox_record(...)  the consumer SDK's Inbox::record: true for the first delivery
--                      of (message_id, consumer), false for a duplicate
--
-- All three are SECURITY INVOKER: they give no privilege the caller lacks. enqueue
-- needs INSERT on the producer's columns (schema/roles.sql grants exactly that to the
-- producer role, and EXECUTE on these functions), inbox_record INSERT on the inbox.
-- Each sets its search_path, so a caller's own objects cannot stand in for pg_catalog's.
-- Errors are SQLSTATE 22023 (invalid_parameter_value), name the argument at fault
-- in the message ("outbox.enqueue: routing_key is 300 bytes, the limit is 255") and
-- carry it as the error's column name field.
SET LOCAL lock_timeout = '10s';

-- Layout (RFC 9562 section 5.7): 48 bits of Unix milliseconds, version 7, then 12
-- bits of the sub-millisecond clock (section 6.2 method 3: clock_timestamp() has
-- microseconds), variant 10 and 62 random bits from gen_random_uuid(). The session
-- remembers the last 60-bit time value (the custom setting outbox.uuid_v7_last) and
-- steps past it, so ids from one session strictly increase even when the clock
-- stalls or steps back; across sessions they are ordered by time to the microsecond.
CREATE FUNCTION {{schema}}.uuid_v7() RETURNS uuid
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  us   bigint := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
  t    bigint := (us / 1000) * 4096 + ((us % 1000) * 4096) / 1000;
  last bigint := coalesce(nullif(current_setting('outbox.uuid_v7_last', true), '')::bigint, 0);
BEGIN
  IF t <= last THEN
    t := last + 1;
  END IF;
  PERFORM set_config('outbox.uuid_v7_last', t::text, false);
  -- gen_random_uuid() is a v4: its 17th hex digit already holds variant 10.
  RETURN (lpad(to_hex(t >> 12), 12, '0') || '7' || lpad(to_hex(t & 4095), 3, '0') ||
          substr(replace(gen_random_uuid()::text, '-', ''), 17))::uuid;
END
$$;

-- One place that words a refused argument.
CREATE FUNCTION {{schema}}.outbox_refuse(fn text, arg text, problem text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RAISE EXCEPTION '%.%: % %', btrim('{{schema}}', '"'), fn, arg, problem
    USING ERRCODE = '22023', COLUMN = arg;
END
$$;

-- An AMQP short string: at most 255 bytes; not empty when required.
CREATE FUNCTION {{schema}}.outbox_check_shortstr(fn text, arg text, value text, required boolean)
RETURNS void LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF required AND (value IS NULL OR value = '') THEN
    PERFORM {{schema}}.outbox_refuse(fn, arg, 'must not be empty');
  ELSIF octet_length(value) > 255 THEN
    PERFORM {{schema}}.outbox_refuse(fn, arg, format('is %s bytes, the limit is 255', octet_length(value)));
  END IF;
END
$$;

-- The W3C trace context, as outbox::validate_traceparent / validate_tracestate.
CREATE FUNCTION {{schema}}.outbox_check_trace(traceparent text, tracestate text) RETURNS void
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

-- The headers, as the SDK's validate_header and check_header_frame (and 0007's CHECKs).
CREATE FUNCTION {{schema}}.outbox_check_headers(headers jsonb) RETURNS void
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
    IF name !~ '^[A-Za-z0-9_.-]{1,128}$' THEN
      PERFORM {{schema}}.outbox_refuse('enqueue', format('headers[%L]', left(name, 64)),
        'header name must be 1-128 characters of [A-Za-z0-9_.-]');
    END IF;
    why := CASE
      WHEN name LIKE 'x-outbox-%' THEN 'names starting with ''x-outbox-'' are the relay''s'
      WHEN name IN ('CC', 'BCC') THEN 'RabbitMQ also routes the message to the routing keys it lists'
      WHEN name = 'x-death' OR name LIKE 'x-first-death-%' OR name LIKE 'x-last-death-%'
        THEN 'RabbitMQ sets it when it dead-letters a message'
      WHEN name IN ('x-delivery-count', 'x-received-from', 'x-stream-offset', 'x-shovelled',
                    'x-shovelled-timestamp', 'x-mqtt-publish-qos') OR name LIKE 'x-amqp-1.0-%'
        THEN 'RabbitMQ or one of its plugins sets it'
      WHEN name IN ('x-stream-filter-value', 'x-delay') THEN 'RabbitMQ or one of its plugins interprets it on publish'
      WHEN name IN ('traceparent', 'tracestate') THEN format('set the trace context with the %s argument', name)
    END;
    IF why IS NOT NULL THEN
      PERFORM {{schema}}.outbox_refuse('enqueue', format('headers[%L]', name), 'is reserved: ' || why);
    END IF;
    IF kind <> 'string' THEN
      PERFORM {{schema}}.outbox_refuse('enqueue', format('headers[%L]', name),
        format('must be a JSON string, not a JSON %s', kind));
    END IF;
    IF octet_length(value) > 4096 THEN
      PERFORM {{schema}}.outbox_refuse('enqueue', format('headers[%L]', name),
        format('is %s bytes, the limit is 4096', octet_length(value)));
    END IF;
  END LOOP;
END
$$;

-- What OutboxWriter::enqueue writes, with the same checks. Pass the payload as bytes
-- (bytea): JSON text as UTF-8, e.g. convert_to('{"order":1}', 'UTF8'). max_payload_bytes
-- is the SDK's MessageLimits::max_payload_bytes. Returns the message id: `message_id`
-- when given (an id the caller already handed out), else a new uuid_v7().
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

-- The headers' total with the trace context, as the SDK's sent_headers and
-- outbox::kMaxHeadersBytes: a row within it fits the default frame_max.
CREATE FUNCTION {{schema}}.outbox_check_headers_total(headers jsonb) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF {{schema}}.outbox_headers_bytes(headers) > 130048 THEN
    PERFORM {{schema}}.outbox_refuse('enqueue', 'headers',
      format('would take %s bytes of the AMQP header table (trace context included), the limit is 130048',
             {{schema}}.outbox_headers_bytes(headers)));
  END IF;
END
$$;

-- The consumer SDK's Inbox::record. Call it in the transaction that applies the
-- message's effect, before the effect: true means this is the first delivery of the
-- message to `consumer` (apply the effect, commit, then ack); false means an earlier
-- delivery was committed already (apply nothing, ack). A concurrent delivery of the
-- same message waits here for the other transaction's outcome. Only the inbox's own
-- key counts as a duplicate (ON CONFLICT ON CONSTRAINT inbox_pkey).
CREATE FUNCTION {{schema}}.inbox_record(message_id uuid, consumer text, message_type text DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
  inserted integer;
BEGIN
  IF message_id IS NULL THEN
    PERFORM {{schema}}.outbox_refuse('inbox_record', 'message_id', 'must not be null');
  END IF;
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

-- A producer that writes the row itself (INSERT without message_id) gets a UUIDv7 too.
-- Setting a default rewrites nothing; the C++ SDK always sends its own id.
ALTER TABLE {{schema}}.outbox ALTER COLUMN message_id SET DEFAULT {{schema}}.uuid_v7();

-- Callable by any role (the column default runs as whoever inserts); they grant nothing
-- by themselves (SECURITY INVOKER). Explicit in case default privileges revoke EXECUTE.
GRANT EXECUTE ON FUNCTION
  {{schema}}.uuid_v7(),
  {{schema}}.outbox_refuse(text, text, text),
  {{schema}}.outbox_check_shortstr(text, text, text, boolean),
  {{schema}}.outbox_check_trace(text, text),
  {{schema}}.outbox_check_headers(jsonb),
  {{schema}}.outbox_check_headers_total(jsonb),
  {{schema}}.enqueue(text, text, text, bytea, jsonb, text, text, text, uuid, text, text, integer),
  {{schema}}.inbox_record(uuid, text, text)
TO PUBLIC;
