-- complete / fail: only the holder of the current, unexpired claim may settle it.
-- $1 key  $2 token  $3 'completed' or 'failed'  $4 result text  $5 error text
-- $6 ttl ms (NULL: none)  $7 duration ms
-- `settled` is true when this statement settled the claim, or when this very settle was
-- applied before (its reply lost with a connection). Settling a claim that a 'block'
-- waiter marked (watch.sql) sends NOTIFY (delivered at commit), so the waiter looks again
-- at once; unwatched settles send none (NOTIFY serialises commits server-wide).
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), settled AS (
  UPDATE {table} AS r
  SET status = $3::text, token = NULL, settled_token = $2::text, result = $4::text, error = $5::text,
      updated_at = now.ms, expires_at = now.ms + $6::bigint, lease_expires_at = NULL,
      duration_ms = $7::double precision
  FROM now
  WHERE r.key = $1::text AND r.status = 'pending' AND r.token = $2::text
  RETURNING r.key, r.watched
), notified AS (
  SELECT pg_notify('{channel}', CASE WHEN octet_length(settled.key) <= 7900 THEN settled.key ELSE '' END)
  FROM settled
  WHERE settled.watched
)
SELECT EXISTS (SELECT 1 FROM settled)
       OR EXISTS (SELECT 1 FROM {table} AS p
                  WHERE p.key = $1::text AND p.status = $3::text AND p.settled_token = $2::text
                    AND p.result IS NOT DISTINCT FROM $4::text AND p.error IS NOT DISTINCT FROM $5::text) AS settled,
       (SELECT count(*) FROM notified) AS notified
