-- Least-privilege roles for the outbox. Run with psql as the owner of the schema
-- (whoever ran `outbox-relay migrate`), after migrating:
--
--   psql "$ADMIN_DSN" -v ON_ERROR_STOP=1 -v schema=outbox \
--        -v relay_role=outbox_relay -v producer_role=outbox_producer \
--        [-v consumer_role=outbox_consumer] [-v retention=true] -f schema/roles.sql
--
-- Creates the two roles as NOLOGIN groups when they do not exist, and grants:
--   relay_role:    USAGE on the schema; SELECT on the outbox; UPDATE of the relay's
--                  own state columns only (attempts, next_attempt_at, last_error,
--                  published_at, parked_at: claim with FOR UPDATE SKIP LOCKED, mark
--                  published/failed/parked, `replay`, `dead requeue`), so a stolen
--                  relay credential cannot rewrite a pending row's payload, exchange,
--                  routing key, headers or message id; DELETE as well only with
--                  -v retention=true (relay.retention in the relay, or
--                  `outbox-relay cleanup`). SELECT on outbox_key_sequences (migration
--                  0016; for `outbox-relay sequence-audit`). No INSERT, no DDL,
--                  nothing else.
--   producer_role: USAGE on the schema; INSERT of the producer's columns only
--                  (message_id, exchange, routing_key, message_type, ordering_key,
--                  content_type, headers, correlation_id, payload: what the SDK's
--                  enqueue writes), so it cannot insert a row already published,
--                  parked, retried or delayed; SELECT on outbox_subject_keys and
--                  INSERT of a new wrapped key there (field encryption's per-subject
--                  keys) when that table exists: erasing and re-wrapping keys stay
--                  with the operator. The key's created_by is set by a trigger
--                  (migration 0013), so a producer cannot write it. EXECUTE on
--                  supersede_subject_key() (migration 0013), with which the SDK
--                  replaces a subject's key that does not verify and that another
--                  login created: the old key is kept, never deleted, so a hostile
--                  producer cannot make a subject's events fail or its data unreadable.
--                  It cannot read, change or delete outbox rows.
--                  EXECUTE on enqueue() and uuid_v7() (migration 0008, the SQL
--                  contract for producers in any language): SECURITY INVOKER
--                  functions, so enqueue() inserts under exactly the column grants
--                  above and gives nothing more.
--   consumer_role: (only with -v consumer_role=NAME) USAGE on the schema, INSERT of
--                  (message_id, consumer, message_type) and SELECT of (message_id,
--                  consumer) (ON CONFLICT reads the key) on the inbox, EXECUTE on
--                  inbox_record() (migration 0008): what a consumer in any language
--                  needs for the inbox; its own tables' grants are the application's.
--                  Each of its members records and reads only the inbox rows of the
--                  consumer names mapped to it in inbox_consumers (migration 0014;
--                  the operator fills it, roles.sql never does):
--                    INSERT INTO outbox.inbox_consumers (consumer, member_of)
--                    VALUES ('billing', 'billing_svc'), ('shipping', 'shipping_svc');
--                  a session whose current_user is member_of's role, or a member of
--                  it, may use that name (map a login, or a group per consumer that
--                  its logins are IN ROLE of; never the consumer role itself, whose
--                  members would all share the name). Row-level security on the
--                  inbox: a RESTRICTIVE policy for the consumer role (inbox_own_consumer)
--                  and a PERMISSIVE one for every role (inbox_any_role), so the owner,
--                  an admin or a cleanup login outside the consumer role see every row
--                  as before. Recording another consumer's row fails with SQLSTATE
--                  42501 naming the consumer and the role; its rows are invisible. A
--                  member mapped to no name is listed in a WARNING: its every record
--                  would fail. With migration 0017: SELECT, INSERT, UPDATE and DELETE
--                  on inbox_key_sequences and inbox_held (the sequence guard), under
--                  the same two policies (one consumer name's rows each).
-- Then give them to login roles, e.g.
--   CREATE ROLE order_service LOGIN PASSWORD '...' IN ROLE outbox_producer;
--   CREATE ROLE relay LOGIN PASSWORD '...' IN ROLE outbox_relay;
-- Idempotent: every grant of the two roles on these tables is revoked first (table
-- and column privileges alike), so running it again on an existing database narrows
-- broader grants made before (table-wide UPDATE or INSERT, a DELETE without
-- retention). The relay checks its privileges at start and names any that is missing.

\if :{?retention}
\else
\set retention false
\endif
\if :{?consumer_role}
\set with_consumer true
\else
\set with_consumer false
\endif

SELECT format('CREATE ROLE %I NOLOGIN', :'relay_role')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'relay_role') \gexec
SELECT format('CREATE ROLE %I NOLOGIN', :'producer_role')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'producer_role') \gexec
\if :with_consumer
SELECT format('CREATE ROLE %I NOLOGIN', :'consumer_role')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'consumer_role') \gexec
\endif

BEGIN;
-- Row-level security and policies take the inbox's exclusive lock for an instant: do
-- not queue every consumer behind a long transaction (run it again if this expires).
SET LOCAL lock_timeout = '10s';
GRANT USAGE ON SCHEMA :"schema" TO :"relay_role", :"producer_role";

-- REVOKE on a table also revokes the column privileges on it: what follows is all
-- these roles hold on the outbox, whatever was granted before.
REVOKE ALL ON :"schema".outbox FROM :"relay_role", :"producer_role";
GRANT SELECT ON :"schema".outbox TO :"relay_role";
GRANT UPDATE (attempts, next_attempt_at, last_error, refused_by_broker, published_at, parked_at)
  ON :"schema".outbox TO :"relay_role";
GRANT INSERT (message_id, exchange, routing_key, message_type, ordering_key, content_type,
              headers, correlation_id, payload)
  ON :"schema".outbox TO :"producer_role";
-- Scheduled delivery (migration 0018): producers may set deliver_at.
SELECT format('GRANT INSERT (deliver_at) ON %I.outbox TO %I', :'schema', :'producer_role')
 WHERE EXISTS (SELECT FROM pg_attribute WHERE attrelid = format('%I.outbox', :'schema')::regclass
                 AND attname = 'deliver_at' AND NOT attisdropped) \gexec
\if :retention
GRANT DELETE ON :"schema".outbox TO :"relay_role";
\endif

-- Field encryption (migration 0003): producers look up subject keys and create the
-- missing ones (a new wrapped key, never a tombstone); erasure and re-wrapping
-- (UPDATE) are the operator's.
SELECT format('REVOKE ALL ON %I.outbox_subject_keys FROM %I, %I', :'schema', :'relay_role', :'producer_role')
 WHERE to_regclass(format('%I.outbox_subject_keys', :'schema')) IS NOT NULL \gexec
SELECT format('GRANT SELECT, INSERT (subject, key_id, wrapping_key_id, wrapped_key) '
              'ON %I.outbox_subject_keys TO %I', :'schema', :'producer_role')
 WHERE to_regclass(format('%I.outbox_subject_keys', :'schema')) IS NOT NULL \gexec
-- Migration 0013: the superseded keys are the operator's (and decrypting readers');
-- producers replace a foreign key that does not verify only through the function.
SELECT format('REVOKE ALL ON %I.outbox_subject_keys_superseded FROM %I, %I', :'schema', :'relay_role', :'producer_role')
 WHERE to_regclass(format('%I.outbox_subject_keys_superseded', :'schema')) IS NOT NULL \gexec
SELECT format('GRANT EXECUTE ON FUNCTION %I.supersede_subject_key(text, text, text, text, bytea) TO %I',
              :'schema', :'producer_role')
 WHERE to_regprocedure(format('%I.supersede_subject_key(text, text, text, text, bytea)', :'schema')) IS NOT NULL \gexec

-- Migration 0016: the per-key sequence counters are the trigger's; the relay role may
-- read them (outbox-relay sequence-audit compares them with a consumer's).
SELECT format('REVOKE ALL ON %I.outbox_key_sequences FROM %I, %I', :'schema', :'relay_role', :'producer_role')
 WHERE to_regclass(format('%I.outbox_key_sequences', :'schema')) IS NOT NULL \gexec
SELECT format('GRANT SELECT ON %I.outbox_key_sequences TO %I', :'schema', :'relay_role')
 WHERE to_regclass(format('%I.outbox_key_sequences', :'schema')) IS NOT NULL \gexec

-- The SQL contract (migration 0008), when the schema has it.
-- enqueue() has deliver_at from migration 0018 on: whichever signature the schema has.
SELECT format('GRANT EXECUTE ON FUNCTION %s, %I.uuid_v7() TO %I', f, :'schema', :'producer_role')
  FROM (SELECT coalesce(
          to_regprocedure(format('%I.enqueue(text, text, text, bytea, jsonb, text, text, text, uuid, text, text, '
                                 'integer, timestamptz)', :'schema')),
          to_regprocedure(format('%I.enqueue(text, text, text, bytea, jsonb, text, text, text, uuid, text, text, '
                                 'integer)', :'schema')))::text AS f) e
 WHERE f IS NOT NULL \gexec
\if :with_consumer
GRANT USAGE ON SCHEMA :"schema" TO :"consumer_role";
REVOKE ALL ON :"schema".inbox FROM :"consumer_role";
-- ON CONFLICT reads the key's columns: SELECT on those two, nothing else.
GRANT INSERT (message_id, consumer, message_type), SELECT (message_id, consumer)
  ON :"schema".inbox TO :"consumer_role";
SELECT format('GRANT EXECUTE ON FUNCTION %I.inbox_record(uuid, text, text) TO %I', :'schema', :'consumer_role')
 WHERE to_regprocedure(format('%I.inbox_record(uuid, text, text)', :'schema')) IS NOT NULL \gexec

-- One consumer cannot record or read another's rows (migration 0014). Without the
-- mapping table the isolation cannot be set up: stop, naming the missing migration,
-- rather than leave consumers sharing every name.
SELECT set_config('outbox_roles.schema', :'schema', true), set_config('outbox_roles.consumer_role', :'consumer_role', true)
\g /dev/null
DO $$
BEGIN
  IF to_regclass(format('%I.inbox_consumers', current_setting('outbox_roles.schema'))) IS NULL THEN
    RAISE EXCEPTION 'schema % has no inbox_consumers table: run `outbox-relay migrate` (migration 0014) first',
      quote_ident(current_setting('outbox_roles.schema'));
  END IF;
END $$;
REVOKE ALL ON :"schema".inbox_consumers FROM :"consumer_role";
GRANT SELECT ON :"schema".inbox_consumers TO :"consumer_role";
ALTER TABLE :"schema".inbox ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS inbox_any_role ON :"schema".inbox;
DROP POLICY IF EXISTS inbox_own_consumer ON :"schema".inbox;
-- Every role sees and writes what its grants allow, as without row-level security...
CREATE POLICY inbox_any_role ON :"schema".inbox AS PERMISSIVE TO PUBLIC USING (true) WITH CHECK (true);
-- ...and a member of the consumer role only its own consumer names' rows, for every
-- command (a DELETE granted to it later purges its own rows only).
CREATE POLICY inbox_own_consumer ON :"schema".inbox AS RESTRICTIVE TO :"consumer_role"
  USING (:"schema".inbox_consumer_is_mine(consumer)) WITH CHECK (:"schema".inbox_consumer_check(consumer));
-- The sequence guard's tables (migration 0017), when the schema has them: read and
-- written by the consumer's own transactions, limited to its own consumer names by
-- the same two policies as the inbox.
DO $$
DECLARE
  s text := current_setting('outbox_roles.schema');
  r text := current_setting('outbox_roles.consumer_role');
  t text;
BEGIN
  IF to_regclass(format('%I.inbox_key_sequences', s)) IS NULL THEN
    RETURN;
  END IF;
  FOREACH t IN ARRAY ARRAY['inbox_key_sequences', 'inbox_held'] LOOP
    EXECUTE format('REVOKE ALL ON %I.%I FROM %I', s, t, r);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I.%I TO %I', s, t, r);
    EXECUTE format('ALTER TABLE %I.%I ENABLE ROW LEVEL SECURITY', s, t);
    EXECUTE format('DROP POLICY IF EXISTS %I ON %I.%I', t || '_any_role', s, t);
    EXECUTE format('DROP POLICY IF EXISTS %I ON %I.%I', t || '_own_consumer', s, t);
    EXECUTE format('CREATE POLICY %I ON %I.%I AS PERMISSIVE TO PUBLIC USING (true) WITH CHECK (true)',
                   t || '_any_role', s, t);
    EXECUTE format('CREATE POLICY %I ON %I.%I AS RESTRICTIVE TO %I USING (%I.inbox_consumer_is_mine(consumer)) '
                   'WITH CHECK (%I.inbox_consumer_check(consumer))', t || '_own_consumer', s, t, r, s, s);
  END LOOP;
END $$;
-- Members that map to no consumer name: every inbox_record of theirs would fail.
-- (Superusers and BYPASSRLS roles are members of every role and bypass the policy.)
DO $$
DECLARE
  login text;
BEGIN
  FOR login IN EXECUTE format(
      'SELECT r.rolname FROM pg_roles r WHERE r.rolcanlogin AND NOT r.rolsuper AND NOT r.rolbypassrls '
      'AND pg_has_role(r.oid, %L, ''USAGE'') '
      'AND NOT EXISTS (SELECT FROM %I.inbox_consumers m JOIN pg_roles g ON g.rolname = m.member_of '
      'WHERE pg_has_role(r.oid, g.oid, ''MEMBER'')) ORDER BY 1',
      current_setting('outbox_roles.consumer_role'), current_setting('outbox_roles.schema'))
  LOOP
    RAISE WARNING 'login % is in role % but %.inbox_consumers maps no consumer name to it: its inbox records will be refused',
      quote_ident(login), quote_ident(current_setting('outbox_roles.consumer_role')),
      quote_ident(current_setting('outbox_roles.schema'));
  END LOOP;
END $$;
\endif
COMMIT;
