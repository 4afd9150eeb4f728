-- per_key ordering: the relay finds each key's head (its lowest pending id) with
-- DISTINCT ON (ordering_key) ... ORDER BY ordering_key, id over pending rows.
CREATE INDEX outbox_pending_key_idx ON {{schema}}.outbox (ordering_key, id)
  WHERE published_at IS NULL;
