-- release: an operator frees a stuck pending record. It becomes failed (the next call
-- runs) and loses its token (the stuck owner can no longer settle it); waiters are woken.
-- $1 key.  One row: released or not.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), released AS (
  UPDATE {table} AS r
  SET status = 'failed', token = NULL, settled_token = NULL, lease_expires_at = NULL, updated_at = now.ms,
      error = '{"name":"Released","message":"released by an operator"}'
  FROM now
  WHERE r.key = $1::text AND r.status = 'pending'
  RETURNING r.key, r.watched
), notified AS (
  SELECT pg_notify('{channel}', CASE WHEN octet_length(released.key) <= 7900 THEN released.key ELSE '' END)
  FROM released
  WHERE released.watched
)
SELECT EXISTS (SELECT 1 FROM released) AS released, (SELECT count(*) FROM notified) AS notified
