-- release: an operator frees a stuck pending record. It becomes failed (the next call
-- runs) and loses its token (the stuck owner can no longer settle it); waiters are woken
-- by the claim's tag (SHA-256 of the token it held, as in settle.sql: never the key).
-- $1 key.  One row: released or not.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), held AS (
  SELECT key, token FROM {table} WHERE key = $1::text AND status = 'pending' FOR UPDATE
), released AS (
  UPDATE {table} AS r
  SET status = 'failed', token = NULL, settled_token = NULL, lease_expires_at = NULL, updated_at = now.ms,
      error = '{"name":"Released","message":"released by an operator"}'
  FROM now, held
  WHERE r.key = held.key AND r.status = 'pending'
  RETURNING r.key, r.watched, held.token
), notified AS (
  SELECT pg_notify('{channel}', coalesce(encode(sha256(convert_to(released.token, 'UTF8')), 'hex'), ''))
  FROM released
  WHERE released.watched
)
SELECT EXISTS (SELECT 1 FROM released) AS released, (SELECT count(*) FROM notified) AS notified
