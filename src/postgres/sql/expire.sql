-- expire: gives the settled rows among $1 the expiry $2 (epoch ms): a step's record expires
-- with its completed call (see lib/core/step.ts). A pending row is left alone (it never
-- expires while unresolved). The number of rows changed is the answer. The rows are
-- locked in key order first, the order acquire.sql claims in (no cycle of waits).
-- $1 keys  $2 expires at.
WITH locked AS (
  SELECT key FROM {table}
  WHERE key = ANY($1::text[]) AND status <> 'pending'
  ORDER BY key COLLATE "C"
  FOR UPDATE
)
UPDATE {table} AS r SET expires_at = $2::bigint
FROM locked
WHERE r.key = locked.key AND r.status <> 'pending'
