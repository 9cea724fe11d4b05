-- recent: the newest unexpired records that match, at most $5 of them, newest change first
-- (ties by key), without their results unless $4. $1 status, $2 name, $3 updated since
-- (epoch ms); NULL: any. The server sorts and cuts (a top-N sort: memory for $5 rows), so
-- the client reads $5 rows, not the table (inspect --limit, the page, stats' key-id lookup).
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
)
SELECT r.key, r.name, r.fingerprint, r.status, CASE WHEN $4::boolean THEN r.result END AS result,
       r.error, r.attempts, r.created_at, r.updated_at, r.expires_at, r.lease_expires_at, r.meta,
       r.duration_ms
FROM {table} AS r, now
WHERE ($1::text IS NULL OR r.status = $1::text)
  AND ($2::text IS NULL OR r.name = $2::text)
  AND ($3::bigint IS NULL OR r.updated_at >= $3::bigint)
  AND NOT (r.status <> 'pending' AND coalesce(r.expires_at <= now.ms, false))
ORDER BY r.updated_at DESC, r.key
LIMIT $5::bigint
