-- recent: the newest unexpired records that match, at most $5 of them, newest change first
-- (ties by key), without their results unless $4, each row ending with how many matched in
-- all. $1 status, $2 name, $3 updated since (epoch ms); NULL: any. The server sorts and cuts
-- (a top-N sort: memory for $5 rows), so the client reads $5 rows, not the table (inspect
-- --limit, the page, stats' key-id lookup). The page and the count are one statement, one
-- snapshot: as two, a record committed between them was counted and not listed (or listed
-- and not counted). When nothing matches, one row comes back with a NULL key and the count.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
)
SELECT p.key, p.name, p.fingerprint, p.status, p.result, p.error, p.attempts, p.created_at,
       p.updated_at, p.expires_at, p.lease_expires_at, p.meta, p.duration_ms, c.matched
FROM (
  SELECT count(*) AS matched
  FROM {table} AS r, now
  WHERE ($1::text IS NULL OR r.status = $1::text)
    AND ($2::text IS NULL OR r.name = $2::text)
    AND ($3::bigint IS NULL OR r.updated_at >= $3::bigint)
    AND NOT (r.status <> 'pending' AND coalesce(r.expires_at <= now.ms, false))
) AS c
LEFT JOIN LATERAL (
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
) AS p ON true
ORDER BY p.updated_at DESC, p.key
