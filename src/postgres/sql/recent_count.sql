-- recent_count: how many records `recent` matches before its limit ($1 status, $2 name,
-- $3 updated since, as there). One number crosses to the client, no row.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
)
SELECT count(*)
FROM {table} AS r, now
WHERE ($1::text IS NULL OR r.status = $1::text)
  AND ($2::text IS NULL OR r.name = $2::text)
  AND ($3::bigint IS NULL OR r.updated_at >= $3::bigint)
  AND NOT (r.status <> 'pending' AND coalesce(r.expires_at <= now.ms, false))
