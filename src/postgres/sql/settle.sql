-- complete / fail for a batch of claims: only the holder of a current claim may settle it.
-- A single settle (and idempotentTx's) is a batch of one.
-- $1 keys  $2 tokens  $3 'completed' or 'failed'  $4 result texts  $5 error texts
-- $6 ttl ms (NULL: none)  $7 duration ms: arrays of one length; the keys are distinct.
-- One row per settle, in the order given (`n`): `settled` is true when this statement
-- settled the claim, or when this very settle was applied before (its reply lost with a
-- connection). `stale`: neither, though this statement's snapshot showed the claim
-- pending under this token: the row changed after the snapshot (the UPDATE waited for its
-- writer, perhaps this very settle's first attempt), so the snapshot cannot tell whether
-- this settle was applied: the caller sends it again, with a new snapshot. Settling a claim that a 'block' waiter marked (watch.sql) sends NOTIFY
-- (delivered at commit), so the waiter looks again at once; unwatched settles send none
-- (NOTIFY serialises commits server-wide).
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::double precision[])
    WITH ORDINALITY AS i(key, token, status, result, error, ttl_ms, duration_ms, n)
), settled AS (
  UPDATE {table} AS r
  SET status = i.status, token = NULL, settled_token = i.token, result = i.result, error = i.error,
      updated_at = now.ms, expires_at = now.ms + i.ttl_ms, lease_expires_at = NULL,
      duration_ms = i.duration_ms
  FROM input AS i, now
  WHERE r.key = i.key AND r.status = 'pending' AND r.token = i.token
  RETURNING r.key, r.watched
), notified AS (
  SELECT pg_notify('{channel}', CASE WHEN octet_length(settled.key) <= 7900 THEN settled.key ELSE '' END)
  FROM settled
  WHERE settled.watched
)
SELECT i.n,
       s.key IS NOT NULL
       OR EXISTS (SELECT 1 FROM {table} AS p
                  WHERE p.key = i.key AND p.status = i.status AND p.settled_token = i.token
                    AND p.result IS NOT DISTINCT FROM i.result AND p.error IS NOT DISTINCT FROM i.error) AS settled,
       s.key IS NULL
       AND EXISTS (SELECT 1 FROM {table} AS p WHERE p.key = i.key AND p.status = 'pending' AND p.token = i.token) AS stale,
       (SELECT count(*) FROM notified) AS notified
FROM input AS i
LEFT JOIN settled AS s ON s.key = i.key
ORDER BY i.n
