-- Whether the broker refused a row's last publish (closed the channel, or the whole
-- connection, over that row alone) is a column of its own. The relay publishes such
-- a row alone at its next attempt, so it cannot take innocent rows down with it again.
-- Before, the relay read it from a prefix of last_error ('refused by broker: '): a
-- decision made on text that is meant for people.
--
-- Relay state, like attempts and last_error: producers never write it (roles.sql
-- grants no INSERT of it), the relay sets it with every failure it records and
-- `outbox-relay dead requeue` leaves it as it is (as it leaves last_error).
-- A constant default: adding the column rewrites nothing, at any table size.
SET LOCAL lock_timeout = '10s';

ALTER TABLE {{schema}}.outbox ADD COLUMN refused_by_broker boolean NOT NULL DEFAULT false;

-- Rows still to be published whose last failure was such a refusal (few: a backfill
-- that touches no published row).
UPDATE {{schema}}.outbox SET refused_by_broker = true
 WHERE published_at IS NULL AND starts_with(last_error, 'refused by broker: ');

-- The relay's role may update the column wherever it may update last_error (roles.sql
-- grants both from now on): a relay upgraded before its grants are run again keeps
-- marking rows instead of failing every mark on a missing privilege.
DO $$
DECLARE
  grantee oid;
BEGIN
  FOR grantee IN
    SELECT DISTINCT a.grantee FROM pg_attribute att, aclexplode(att.attacl) a
     WHERE att.attrelid = '{{schema}}.outbox'::regclass AND att.attname = 'last_error'
       AND a.privilege_type = 'UPDATE' AND a.grantee <> 0
  LOOP
    EXECUTE format('GRANT UPDATE (refused_by_broker) ON {{schema}}.outbox TO %s', grantee::regrole);
  END LOOP;
END $$;
