-- get: the records of the keys given, unless expired (no row for a key without one).
-- $1 keys. One statement answers every read of a batch (idempotentTx's replays of one
-- turn of the event loop); PostgresStore's get is a batch of one.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
)
SELECT r.key, r.name, r.fingerprint, r.status, r.result, r.error, r.attempts, r.created_at, r.updated_at,
       r.expires_at, r.lease_expires_at, r.meta, r.duration_ms
FROM {table} AS r, now
WHERE r.key = ANY($1::text[])
  AND NOT (r.status <> 'pending' AND coalesce(r.expires_at <= now.ms, false))
