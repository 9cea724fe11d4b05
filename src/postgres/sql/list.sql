-- list: unexpired records, oldest first.  $1 status (NULL: any)  $2 limit (NULL: all).
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
)
SELECT r.key, r.name, r.fingerprint, r.status, r.result, r.error, r.attempts, r.created_at, r.updated_at,
       r.expires_at, r.lease_expires_at, r.meta, r.duration_ms
FROM {table} AS r, now
WHERE ($1::text IS NULL OR r.status = $1::text)
  AND NOT (r.status <> 'pending' AND coalesce(r.expires_at <= now.ms, false))
ORDER BY r.created_at, r.key
LIMIT $2::bigint
