-- Which logins may record and read which consumer's inbox rows (issue 40, finding 2).
-- Until now any login of the consumer role could call inbox_record('<id>', 'billing')
-- for a consumer not its own: it got true, and the real billing consumer later got
-- false for that message and skipped its charge. It could also read every consumer's
-- (message_id, consumer) rows.
--
-- The operator says which role records under which consumer name, one row each:
--
--   INSERT INTO outbox.inbox_consumers (consumer, member_of) VALUES ('billing', 'billing_svc');
--
-- A session may use the consumer name's rows when its current_user is a member of
-- that role (is it, or belongs to it, directly or not): a login per service, or a
-- group per consumer name that each of its logins (a rotated credential, a blue and a
-- green deployment) is IN ROLE of. schema/roles.sql turns row-level security on for
-- the consumer role with these two functions; this migration adds the table and the
-- functions only, so it changes what no login may do until roles.sql runs again
-- (docs/UPGRADING.md: fill the table first). Roles outside the consumer role (the
-- owner, an admin, a cleanup login) keep seeing every row.
--
-- A new, empty table and new functions: the inbox is not touched, no lock on it.
SET LOCAL lock_timeout = '10s';

CREATE TABLE {{schema}}.inbox_consumers (
  -- A consumer name as the SDK and inbox_record() take it.
  consumer   text NOT NULL CHECK (consumer ~ '^[A-Za-z0-9_.:-]{1,200}$'),
  -- A role name, not its oid: the row survives a dump and restore, and a role dropped
  -- and made again. A name that is no role maps nothing (it is never an error).
  member_of  name NOT NULL,
  CONSTRAINT inbox_consumers_pkey PRIMARY KEY (consumer, member_of)
);

-- Whether the current role may use `consumer`'s inbox rows: the policy's USING (which
-- rows a consumer login reads, locks or deletes). SECURITY INVOKER: the consumer role
-- reads the mapping itself (roles.sql grants SELECT on it), so nothing is lent.
-- pg_has_role on the oid of a joined role: a mapped name that is no role is skipped,
-- where pg_has_role(name) would raise and fail every consumer's statement.
CREATE FUNCTION {{schema}}.inbox_consumer_is_mine(consumer text) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp AS $$
  SELECT EXISTS (SELECT FROM {{schema}}.inbox_consumers m JOIN pg_roles r ON r.rolname = m.member_of
                  WHERE m.consumer = $1 AND pg_has_role(current_user, r.oid, 'MEMBER'))
$$;

-- The policy's WITH CHECK (a row a consumer login inserts): inbox_consumer_is_mine,
-- refusing with an error that names the consumer and the role, where PostgreSQL's
-- own would say only 'new row violates row-level security policy for table "inbox"'.
-- SQLSTATE 42501 (insufficient_privilege), the consumer column as its column field.
CREATE FUNCTION {{schema}}.inbox_consumer_check(consumer text) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT {{schema}}.inbox_consumer_is_mine(consumer) THEN
    RAISE EXCEPTION '%.inbox: role % may not record consumer %: %.inbox_consumers maps no role of it to that name',
      btrim('{{schema}}', '"'), {{schema}}.outbox_quoted(current_user::text), {{schema}}.outbox_quoted(consumer, 80),
      btrim('{{schema}}', '"')
      USING ERRCODE = 'insufficient_privilege', COLUMN = 'consumer', TABLE = 'inbox',
            SCHEMA = btrim('{{schema}}', '"');
  END IF;
  RETURN true;
END
$$;

-- Policies call them as the querying role; granted as 0008's helpers are.
GRANT EXECUTE ON FUNCTION {{schema}}.inbox_consumer_is_mine(text), {{schema}}.inbox_consumer_check(text) TO PUBLIC;
