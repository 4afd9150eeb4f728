-- The header checks of 0007, same rules, same names, same error, at a fraction of
-- the cost. As CHECK constraints they cost every INSERT statement about 0.4 ms of the
-- backend's CPU: PostgreSQL reads each constraint's stored expression tree back from
-- text (the jsonpath constants byte by byte) and plans it again for every statement,
-- and the two SQL functions' bodies are parsed and planned again each time. That more
-- than halved a producer's single-row INSERT rate (1 300 against 3 100 a second on one
-- connection; docs/PERFORMANCE.md, "Round three"). A PL/pgSQL trigger keeps its
-- compiled body and plans for the session, reads the headers once for all rules, and
-- is not called at all for a row without headers. outbox_shortstr_lengths (plain
-- column lengths, cheap) stays the CHECK it was.
--
-- The contract is unchanged (docs/CONFIGURATION.md, "Message limits"):
--   * a row that breaks a rule fails its INSERT (or UPDATE) with SQLSTATE 23514
--     (check_violation), the message 'new row for relation "outbox" violates check
--     constraint "<rule>"' and the rule's name as the error's constraint field;
--   * the rules and their names are 0007's: outbox_header_names,
--     outbox_header_names_reserved, outbox_header_values, outbox_headers_object,
--     outbox_headers_size (and the CHECK outbox_shortstr_lengths);
--   * when a row breaks several, the first of them in that (alphabetical) order is
--     named, as PostgreSQL checked the constraints in name order (BEFORE triggers
--     run before CHECKs, and outbox_shortstr_lengths comes last);
--   * a row carrying relay state (attempts not 0, or last_error, published_at or
--     parked_at set) is exempt, on INSERT and on every UPDATE: the trigger's WHEN
--     clause, so the relay's marks run no PL/pgSQL at all; so is a row with the
--     empty headers '{}', which no header rule can refuse;
--   * ENABLE ALWAYS: it fires under session_replication_role = replica too, as a
--     CHECK would.
-- Unlike a CHECK's, the error carries no DETAIL with the row's values (a payload or
-- header may hold a secret). outbox_header_value_max_bytes and outbox_headers_bytes
-- stay: 0008's enqueue() and operators' queries use them.
SET LOCAL lock_timeout = '10s';

CREATE FUNCTION {{schema}}.outbox_row_checks() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  name          text;
  value         jsonb;
  value_text    text;
  total         bigint := 0;
  names_bad     boolean := false;
  reserved_bad  boolean := false;
  values_bad    boolean := false;
  object_bad    boolean := jsonb_typeof(NEW.headers) <> 'object';
  rule          text;
BEGIN
  IF NOT object_bad THEN
    FOR name, value IN SELECT e.key, e.value FROM jsonb_each(NEW.headers) e LOOP
      -- jsonb_each_text's value, as 0007's functions summed: NULL for a JSON null.
      value_text := value #>> '{}';
      object_bad := object_bad OR jsonb_typeof(value) <> 'string';
      names_bad := names_bad OR name !~ '^[A-Za-z0-9_.-]{1,128}$';
      -- Case-sensitive, as RabbitMQ reads them: outbox::reserved_header_reason's list.
      reserved_bad := reserved_bad OR starts_with(name, 'x-outbox-') OR starts_with(name, 'x-first-death-')
        OR starts_with(name, 'x-last-death-') OR starts_with(name, 'x-amqp-1.0-')
        OR name IN ('CC', 'BCC', 'x-death', 'x-delivery-count', 'x-received-from', 'x-stream-filter-value',
                    'x-stream-offset', 'x-delay', 'x-shovelled', 'x-shovelled-timestamp', 'x-mqtt-publish-qos');
      values_bad := values_bad OR coalesce(octet_length(value_text) > 4096, false);
      -- 6 bytes + name + value per entry in the AMQP header table (0007's bound).
      total := total + coalesce(6 + octet_length(name) + octet_length(value_text), 0);
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
    RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', TG_TABLE_NAME, rule
      USING ERRCODE = 'check_violation', CONSTRAINT = rule, TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA;
  END IF;
  RETURN NEW;
END
$$;

-- Trigger functions need no EXECUTE at fire time; granted as 0007's functions were,
-- in case a tool checks it.
GRANT EXECUTE ON FUNCTION {{schema}}.outbox_row_checks() TO PUBLIC;

-- The rules and the trigger swap in one transaction: no moment without either.
ALTER TABLE {{schema}}.outbox
  DROP CONSTRAINT outbox_headers_object,
  DROP CONSTRAINT outbox_header_names,
  DROP CONSTRAINT outbox_header_names_reserved,
  DROP CONSTRAINT outbox_header_values,
  DROP CONSTRAINT outbox_headers_size;

CREATE TRIGGER outbox_row_checks BEFORE INSERT OR UPDATE ON {{schema}}.outbox
  FOR EACH ROW
  WHEN (NEW.attempts = 0 AND NEW.last_error IS NULL AND NEW.published_at IS NULL AND NEW.parked_at IS NULL
        AND NEW.headers <> '{}'::jsonb)
  EXECUTE FUNCTION {{schema}}.outbox_row_checks();
ALTER TABLE {{schema}}.outbox ENABLE ALWAYS TRIGGER outbox_row_checks;
