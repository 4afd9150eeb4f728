-- The row rules equal enqueue()'s and the SDK's for every column (issue 40, finding
-- 7). A plain INSERT took what enqueue() and validate_message refuse: the nil or the
-- max UUID as message_id, an empty content_type, an empty correlation_id; and a
-- routing key with CR, LF, TAB or ESC passed every rule and was published as it was.
-- New rules, in the style of 0009's (SQLSTATE 23514, 'new row for relation "outbox"
-- violates check constraint "<rule>"', the rule as the error's constraint field),
-- with the column at fault and its value (escaped, outbox_quoted) after a colon and
-- the column as the error's column field:
--
--   outbox_content_type_not_empty    content_type is not ''
--   outbox_control_characters        exchange, routing_key, message_type, content_type
--                                    and correlation_id hold no control character
--                                    (U+0000-U+001F, U+007F-U+009F): the relay sends
--                                    them as AMQP fields a consumer logs and routes on
--   outbox_correlation_id_not_empty  correlation_id is NULL or not ''
--   outbox_message_id_distinct       message_id is neither the nil nor the max UUID
--   outbox_trace_context             headers' traceparent and tracestate follow the
--                                    W3C syntax enqueue() checks (one function,
--                                    outbox_trace_fault, decides for both)
--
-- The C++ SDK refuses the same control characters from this version on, and so does
-- enqueue() (22023, naming the argument). ordering_key is not sent: it stays free.
--
-- Live tables: nothing already in the table is refused or scanned. A rule of a
-- column applies to an INSERT, and to an UPDATE that changes that column; `replay`
-- of an old row that breaks one (its columns unchanged) works as before. The header
-- rules of 0009 keep their behaviour. `outbox-relay status` counts the rows still to
-- be published (pending or parked) that break a rule, by rule, with
-- outbox_row_fault() below. When a row breaks several, the first in name order is
-- named, as before; a relay-state row is exempt, as before (the trigger's WHEN).
SET LOCAL lock_timeout = '10s';

-- What is wrong with a trace context, as (argument, problem), or NULLs: 0011's
-- outbox_check_trace rules, returned instead of raised so the row rules can use them.
CREATE FUNCTION {{schema}}.outbox_trace_fault(traceparent text, tracestate text, OUT arg text, OUT problem text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  member text;
  keys   text[] := '{}';
BEGIN
  IF traceparent IS NULL THEN
    IF tracestate IS NOT NULL THEN
      arg := 'tracestate'; problem := 'needs a traceparent';
    END IF;
    RETURN;
  END IF;
  arg := 'traceparent';
  IF octet_length(traceparent) > 4096 THEN
    problem := format('is %s bytes, the limit is 4096 (a header value''s)', octet_length(traceparent));
    RETURN;
  END IF;
  IF traceparent !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-.*)?$'
     OR left(traceparent, 2) = 'ff' OR (left(traceparent, 2) = '00' AND length(traceparent) <> 55)
     OR substr(traceparent, 4, 32) = repeat('0', 32) OR substr(traceparent, 37, 16) = repeat('0', 16) THEN
    problem := 'is not a W3C traceparent (00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, ids not all zeros)';
    RETURN;
  END IF;
  arg := 'tracestate';
  IF tracestate IS NULL THEN
    arg := NULL;
    RETURN;
  END IF;
  IF octet_length(tracestate) > 512 THEN
    problem := format('is %s bytes, the limit is 512', octet_length(tracestate));
    RETURN;
  END IF;
  FOREACH member IN ARRAY string_to_array(tracestate, ',') LOOP
    member := btrim(member, E' \t');
    CONTINUE WHEN member = '';
    IF member !~ '^([a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$' THEN
      problem := 'member ' || {{schema}}.outbox_quoted(member) || ' is not a valid key=value list member';
      RETURN;
    END IF;
    IF split_part(member, '=', 1) = ANY (keys) THEN
      problem := 'key ' || {{schema}}.outbox_quoted(split_part(member, '=', 1)) || ' appears twice';
      RETURN;
    END IF;
    keys := keys || split_part(member, '=', 1);
    IF cardinality(keys) > 32 THEN
      problem := 'has more than 32 list members';
      RETURN;
    END IF;
  END LOOP;
  arg := NULL;
END
$$;

GRANT EXECUTE ON FUNCTION {{schema}}.outbox_trace_fault(text, text) TO PUBLIC;

-- 0011's outbox_check_trace on outbox_trace_fault: the same rules and messages.
CREATE OR REPLACE FUNCTION {{schema}}.outbox_check_trace(traceparent text, tracestate text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  fault record;
BEGIN
  SELECT * INTO fault FROM {{schema}}.outbox_trace_fault(traceparent, tracestate);
  IF fault.problem IS NOT NULL THEN
    PERFORM {{schema}}.outbox_refuse('enqueue', fault.arg, fault.problem);
  END IF;
END
$$;

-- The first rule `r` breaks, in name order, what is wrong and the column at fault
-- (all NULL when none; no column for a header rule). With `previous` (an UPDATE's
-- old row), a column rule is checked only when its column changed. Relay state is
-- not looked at: the trigger's WHEN exempts such rows, and `status` asks of every row
-- still to be published. The header rules are 0009's.
CREATE FUNCTION {{schema}}.outbox_row_fault(r {{schema}}.outbox, previous {{schema}}.outbox DEFAULT NULL,
                                            OUT rule text, OUT problem text, OUT fault_column text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  -- A class of control characters for the regex: C0, DEL and C1.
  controls      constant text := E'[\\u0001-\\u001f\\u007f-\\u009f]';
  column_name   text;
  value         text;
  hname         text;
  hvalue        jsonb;
  hvalue_text   text;
  total         bigint := 0;
  names_bad     boolean := false;
  reserved_bad  boolean := false;
  values_bad    boolean := false;
  object_bad    boolean := jsonb_typeof(r.headers) <> 'object';
  trace         record;
BEGIN
  IF r.content_type = '' AND (previous IS NULL OR previous.content_type IS DISTINCT FROM r.content_type) THEN
    rule := 'outbox_content_type_not_empty';
    fault_column := 'content_type';
    problem := 'content_type must not be empty (it is '''')';
    RETURN;
  END IF;
  FOR column_name, value IN
    SELECT c.name, c.now FROM (VALUES ('exchange', r.exchange, previous.exchange),
                                      ('routing_key', r.routing_key, previous.routing_key),
                                      ('message_type', r.message_type, previous.message_type),
                                      ('content_type', r.content_type, previous.content_type),
                                      ('correlation_id', r.correlation_id, previous.correlation_id)) c(name, now, was)
     WHERE c.now ~ controls AND (previous IS NULL OR c.was IS DISTINCT FROM c.now)
  LOOP
    rule := 'outbox_control_characters';
    fault_column := column_name;
    problem := column_name || ' holds a control character (U+0000-U+001F, U+007F-U+009F): ' ||
               {{schema}}.outbox_quoted(value);
    RETURN;
  END LOOP;
  IF r.correlation_id = '' AND (previous IS NULL OR previous.correlation_id IS DISTINCT FROM r.correlation_id) THEN
    rule := 'outbox_correlation_id_not_empty';
    fault_column := 'correlation_id';
    problem := 'correlation_id must not be empty (it is ''''; leave it NULL for none)';
    RETURN;
  END IF;
  -- 0009's header rules, unchanged: checked on every INSERT and UPDATE, columns changed or not.
  IF NOT object_bad THEN
    FOR hname, hvalue IN SELECT e.key, e.value FROM jsonb_each(r.headers) e LOOP
      hvalue_text := hvalue #>> '{}';
      object_bad := object_bad OR jsonb_typeof(hvalue) <> 'string';
      names_bad := names_bad OR hname !~ '^[A-Za-z0-9_.-]{1,128}$';
      reserved_bad := reserved_bad OR starts_with(hname, 'x-outbox-') OR starts_with(hname, 'x-first-death-')
        OR starts_with(hname, 'x-last-death-') OR starts_with(hname, 'x-amqp-1.0-')
        OR hname IN ('CC', 'BCC', 'x-death', 'x-delivery-count', 'x-received-from', 'x-stream-filter-value',
                     'x-stream-offset', 'x-delay', 'x-shovelled', 'x-shovelled-timestamp', 'x-mqtt-publish-qos');
      values_bad := values_bad OR coalesce(octet_length(hvalue_text) > 4096, false);
      total := total + coalesce(6 + octet_length(hname) + octet_length(hvalue_text), 0);
    END LOOP;
  END IF;
  rule := CASE
    WHEN names_bad THEN 'outbox_header_names'
    WHEN reserved_bad THEN 'outbox_header_names_reserved'
    WHEN values_bad THEN 'outbox_header_values'
    WHEN object_bad THEN 'outbox_headers_object'
    WHEN total > 130048 THEN 'outbox_headers_size'
  END;
  IF rule IS NOT NULL THEN
    RETURN;  -- no value shown: a header may hold a secret (0009)
  END IF;
  IF r.message_id IN ('00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff')
     AND (previous IS NULL OR previous.message_id IS DISTINCT FROM r.message_id) THEN
    rule := 'outbox_message_id_distinct';
    fault_column := 'message_id';
    problem := format('message_id is the %s UUID ''%s'', which names no message: an inbox would take every later '
                      'message carrying it for a duplicate',
                      CASE WHEN r.message_id = '00000000-0000-0000-0000-000000000000' THEN 'nil' ELSE 'max' END,
                      r.message_id);
    RETURN;
  END IF;
  -- The trace context the relay sends as the traceparent and tracestate headers, as
  -- enqueue() checks it; like a column rule, only when the headers changed.
  IF NOT object_bad AND (r.headers ? 'traceparent' OR r.headers ? 'tracestate')
     AND (previous IS NULL OR previous.headers IS DISTINCT FROM r.headers) THEN
    SELECT * INTO trace FROM {{schema}}.outbox_trace_fault(r.headers ->> 'traceparent', r.headers ->> 'tracestate');
    IF trace.problem IS NOT NULL THEN
      rule := 'outbox_trace_context';
      fault_column := 'headers';
      problem := 'headers'' ' || trace.arg || ' ' || trace.problem;
    END IF;
  END IF;
END
$$;

GRANT EXECUTE ON FUNCTION {{schema}}.outbox_row_fault({{schema}}.outbox, {{schema}}.outbox) TO PUBLIC;

-- 0009's trigger function on outbox_row_fault: the message adds the column and its
-- value for a column rule, and the column field names it.
CREATE OR REPLACE FUNCTION {{schema}}.outbox_row_checks() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  fault record;
BEGIN
  -- OLD is NULL on INSERT: every column rule applies.
  SELECT * INTO fault FROM {{schema}}.outbox_row_fault(NEW, OLD);
  IF fault.rule IS NOT NULL THEN
    RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"%', TG_TABLE_NAME, fault.rule,
      coalesce(': ' || fault.problem, '')
      USING ERRCODE = 'check_violation', CONSTRAINT = fault.rule, TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA,
            COLUMN = coalesce(fault.fault_column, '');
  END IF;
  RETURN NEW;
END
$$;

-- 0009's WHEN ran the function only for a row with headers. A row without them now
-- runs it only when it may break a column rule: the same tests, as cheap expressions
-- (no PL/pgSQL call for the rows every producer writes). outbox_row_fault decides.
DROP TRIGGER outbox_row_checks ON {{schema}}.outbox;
CREATE TRIGGER outbox_row_checks BEFORE INSERT OR UPDATE ON {{schema}}.outbox
  FOR EACH ROW
  WHEN (NEW.attempts = 0 AND NEW.last_error IS NULL AND NEW.published_at IS NULL AND NEW.parked_at IS NULL
        AND (NEW.headers <> '{}'::jsonb
             OR NEW.message_id IN ('00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff')
             OR NEW.content_type = '' OR NEW.correlation_id = ''
             OR NEW.exchange ~ E'[\\u0001-\\u001f\\u007f-\\u009f]' OR NEW.routing_key ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
             OR NEW.message_type ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
             OR NEW.content_type ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
             OR NEW.correlation_id ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'))
  EXECUTE FUNCTION {{schema}}.outbox_row_checks();
ALTER TABLE {{schema}}.outbox ENABLE ALWAYS TRIGGER outbox_row_checks;

-- enqueue()'s rule for the five AMQP fields, as the SDK's (22023, naming the argument).
CREATE FUNCTION {{schema}}.outbox_check_controls(fn text, arg text, value text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF value ~ E'[\\u0001-\\u001f\\u007f-\\u009f]' THEN
    PERFORM {{schema}}.outbox_refuse(fn, arg,
      'holds a control character (U+0000-U+001F, U+007F-U+009F): ' || {{schema}}.outbox_quoted(value));
  END IF;
END
$$;

GRANT EXECUTE ON FUNCTION {{schema}}.outbox_check_controls(text, text, text) TO PUBLIC;

-- 0010's enqueue, refusing control characters in the AMQP fields.
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
  INSERT INTO {{schema}}.outbox (message_id, exchange, routing_key, message_type, ordering_key,
                                 content_type, headers, correlation_id, payload)
  VALUES (id, exchange, routing_key, message_type, coalesce(ordering_key, ''), content_type,
          all_headers, correlation_id, payload);
  RETURN id;
END
$$;
