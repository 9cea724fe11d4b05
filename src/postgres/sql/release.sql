-- release: an operator frees a stuck pending record; waiters are woken by the claim's tag
-- (SHA-256 of the token it held, as in settle.sql: never the key). Its token becomes
-- 32 dashes, which no claim has, so the stuck owner can no longer renew or settle it.
-- With $2 true (reconcile, the default) it stays pending with its lease run out: a claim
-- nobody holds, which the next call takes over as it takes over a dead owner's (acquire:
-- attempts + 1, taken over, reconcile asked). With $2 false it becomes failed: the next
-- call runs.
-- $1 key  $2 reconcile.  One row: released or not.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), held AS (
  SELECT key, token FROM {table} WHERE key = $1::text AND status = 'pending' FOR UPDATE
), released AS (
  UPDATE {table} AS r
  SET status = CASE WHEN $2::boolean THEN 'pending' ELSE 'failed' END,
      token = CASE WHEN $2::boolean THEN '--------------------------------' END,
      settled_token = NULL,
      lease_expires_at = CASE WHEN $2::boolean THEN now.ms END,
      updated_at = now.ms,
      error = CASE WHEN $2::boolean THEN r.error
                   ELSE '{"name":"Released","message":"released by an operator"}' END
  FROM now, held
  WHERE r.key = held.key AND r.status = 'pending'
  RETURNING r.key, r.watched, held.token
), notified AS (
  SELECT pg_notify('{channel}', coalesce(encode(sha256(convert_to(released.token, 'UTF8')), 'hex'), ''))
  FROM released
  WHERE released.watched
)
SELECT EXISTS (SELECT 1 FROM released) AS released, (SELECT count(*) FROM notified) AS notified
