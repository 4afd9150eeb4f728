-- Least-privilege roles for the outbox. Run with psql as the owner of the schema
-- (whoever ran `outbox-relay migrate`), after migrating:
--
--   psql "$ADMIN_DSN" -v ON_ERROR_STOP=1 -v schema=outbox \
--        -v relay_role=outbox_relay -v producer_role=outbox_producer \
--        [-v retention=true] -f schema/roles.sql
--
-- Creates the two roles as NOLOGIN groups when they do not exist, and grants:
--   relay_role:    USAGE on the schema; SELECT and UPDATE on the outbox (claim with
--                  FOR UPDATE SKIP LOCKED, mark published/failed); DELETE as well
--                  only with -v retention=true (relay.retention in the relay, or
--                  `outbox-relay cleanup`). No INSERT, no DDL, nothing else.
--   producer_role: USAGE on the schema; INSERT on the outbox (the SDK's enqueue);
--                  SELECT and INSERT on outbox_subject_keys (field encryption's
--                  per-subject keys) when that table exists. It cannot read,
--                  change or delete outbox rows.
-- Then give them to login roles, e.g.
--   CREATE ROLE order_service LOGIN PASSWORD '...' IN ROLE outbox_producer;
--   CREATE ROLE relay LOGIN PASSWORD '...' IN ROLE outbox_relay;
-- Idempotent: running it again changes nothing; without retention it also
-- revokes a DELETE granted before. The relay checks its privileges at start and
-- names any that is missing.

\if :{?retention}
\else
\set retention false
\endif

SELECT format('CREATE ROLE %I NOLOGIN', :'relay_role')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'relay_role') \gexec
SELECT format('CREATE ROLE %I NOLOGIN', :'producer_role')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'producer_role') \gexec

BEGIN;
GRANT USAGE ON SCHEMA :"schema" TO :"relay_role", :"producer_role";

REVOKE ALL ON :"schema".outbox FROM :"relay_role", :"producer_role";
GRANT SELECT, UPDATE ON :"schema".outbox TO :"relay_role";
GRANT INSERT ON :"schema".outbox TO :"producer_role";
\if :retention
GRANT DELETE ON :"schema".outbox TO :"relay_role";
\endif

-- Field encryption (migration 0003): producers look up and create subject keys.
SELECT format('GRANT SELECT, INSERT ON %I.outbox_subject_keys TO %I', :'schema', :'producer_role')
 WHERE to_regclass(format('%I.outbox_subject_keys', :'schema')) IS NOT NULL \gexec
COMMIT;
