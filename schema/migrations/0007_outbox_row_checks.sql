-- Refuses at the door the rows the relay cannot send, so that one bad row written
-- around the SDK (another language, a hand-written INSERT) fails its producer's
-- transaction with an error naming the rule, instead of reaching the relay. The
-- rules are the SDK's own (producer_sdk/src/message.cpp, outbox/header_rules.h):
-- the SDK never writes a row these refuse. One named constraint per rule, so the
-- producer's error (SQLSTATE 23514) says what is wrong:
--
--   outbox_headers_object          headers is a JSON object whose values are all strings
--   outbox_header_names            each name is 1-128 characters of [A-Za-z0-9_.-]
--   outbox_header_names_reserved   no name the relay (x-outbox-*) or RabbitMQ sets or
--                                  interprets on publish (CC, BCC, x-death, ...)
--   outbox_header_values           each value is at most 4096 bytes
--   outbox_headers_size            the headers' entries in the AMQP header table (6
--                                  bytes + name + value each) total at most 130048
--                                  bytes: a CHECK cannot know the relay's frame_max,
--                                  so this is the default frame_max (131072) less
--                                  1 KiB, more than the frame's envelope, the x-outbox-id
--                                  entry and the longest properties take (861 bytes):
--                                  a row that passes fits the default frame
--   outbox_shortstr_lengths        exchange, routing_key, message_type, content_type,
--                                  correlation_id, ordering_key: at most 255 bytes
--                                  each (AMQP shortstr)
--
-- Live tables: the constraints are added NOT VALID, so adding them scans nothing
-- and holds the table's lock for an instant (lock_timeout bounds the wait for it
-- behind a long transaction; run migrate again if it times out). Rows already in
-- the table are not checked, and they are never VALIDATEd.
--
-- PostgreSQL checks even a NOT VALID constraint on every UPDATE of a row. A bad row
-- from before this migration would then fail the relay's own UPDATE when it marks
-- the row published, failed or parked; that rolls back its whole batch, over and
-- over, and the row could never leave the queue. So each rule exempts a row that
-- carries relay state: a producer inserts none of attempts, last_error,
-- published_at, parked_at, and the relay sets last_error on every failure and
-- attempts on every counted attempt. `dead requeue` keeps last_error, so a requeued
-- old row stays exempt (the relay fails and parks it again); `replay` clears all
-- four, so replaying an old bad row fails with this error and changes nothing.
SET LOCAL lock_timeout = '10s';

-- The sizes need a row set (jsonb_each_text), which a CHECK cannot hold; these are
-- pure functions of their argument, hence IMMUTABLE. 0 for a non-object: that is
-- outbox_headers_object's to refuse.
CREATE FUNCTION {{schema}}.outbox_header_value_max_bytes(headers jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN pg_catalog.jsonb_typeof(headers) = 'object' THEN
    (SELECT coalesce(max(pg_catalog.octet_length(value)), 0) FROM pg_catalog.jsonb_each_text(headers))
  ELSE 0 END
$$;

CREATE FUNCTION {{schema}}.outbox_headers_bytes(headers jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN pg_catalog.jsonb_typeof(headers) = 'object' THEN
    (SELECT coalesce(sum(6 + pg_catalog.octet_length(key) + pg_catalog.octet_length(value)), 0)
       FROM pg_catalog.jsonb_each_text(headers))
  ELSE 0 END
$$;

-- Producers (any role that may insert) run them in the CHECKs: granted explicitly in
-- case default privileges revoke EXECUTE from PUBLIC.
GRANT EXECUTE ON FUNCTION {{schema}}.outbox_header_value_max_bytes(jsonb),
                          {{schema}}.outbox_headers_bytes(jsonb) TO PUBLIC;

ALTER TABLE {{schema}}.outbox
  ADD CONSTRAINT outbox_headers_object CHECK (
    attempts <> 0 OR last_error IS NOT NULL OR published_at IS NOT NULL OR parked_at IS NOT NULL OR (
      jsonb_typeof(headers) = 'object'
      -- strict: lax mode would look into an array value and find its strings
      AND NOT jsonb_path_exists(headers, 'strict $.* ? (@.type() != "string")', '{}', true))) NOT VALID,
  ADD CONSTRAINT outbox_header_names CHECK (
    attempts <> 0 OR last_error IS NOT NULL OR published_at IS NOT NULL OR parked_at IS NOT NULL OR
    jsonb_typeof(headers) <> 'object' OR
    NOT jsonb_path_exists(headers, '$.keyvalue() ? (!(@.key like_regex "^[A-Za-z0-9_.-]{1,128}$"))')) NOT VALID,
  -- Case-sensitive, as RabbitMQ reads them. The list is outbox::reserved_header_reason's.
  ADD CONSTRAINT outbox_header_names_reserved CHECK (
    attempts <> 0 OR last_error IS NOT NULL OR published_at IS NOT NULL OR parked_at IS NOT NULL OR
    jsonb_typeof(headers) <> 'object' OR
    NOT jsonb_path_exists(headers, '$.keyvalue() ? (
      @.key starts with "x-outbox-" || @.key starts with "x-first-death-" ||
      @.key starts with "x-last-death-" || @.key starts with "x-amqp-1.0-" ||
      @.key == "CC" || @.key == "BCC" || @.key == "x-death" || @.key == "x-delivery-count" ||
      @.key == "x-received-from" || @.key == "x-stream-filter-value" || @.key == "x-stream-offset" ||
      @.key == "x-delay" || @.key == "x-shovelled" || @.key == "x-shovelled-timestamp" ||
      @.key == "x-mqtt-publish-qos")')) NOT VALID,
  ADD CONSTRAINT outbox_header_values CHECK (
    attempts <> 0 OR last_error IS NOT NULL OR published_at IS NOT NULL OR parked_at IS NOT NULL OR
    {{schema}}.outbox_header_value_max_bytes(headers) <= 4096) NOT VALID,
  ADD CONSTRAINT outbox_headers_size CHECK (
    attempts <> 0 OR last_error IS NOT NULL OR published_at IS NOT NULL OR parked_at IS NOT NULL OR
    {{schema}}.outbox_headers_bytes(headers) <= 130048) NOT VALID,
  ADD CONSTRAINT outbox_shortstr_lengths CHECK (
    attempts <> 0 OR last_error IS NOT NULL OR published_at IS NOT NULL OR parked_at IS NOT NULL OR (
      octet_length(exchange) <= 255 AND octet_length(routing_key) <= 255 AND
      octet_length(message_type) <= 255 AND octet_length(content_type) <= 255 AND
      octet_length(ordering_key) <= 255 AND coalesce(octet_length(correlation_id), 0) <= 255)) NOT VALID;
