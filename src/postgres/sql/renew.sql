-- renew: extend the lease of the current, unexpired claim.
-- $1 key  $2 token  $3 lease ms.  One row: renewed or not.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), renewed AS (
  UPDATE {table} AS r SET lease_expires_at = now.ms + $3::bigint
  FROM now
  WHERE r.key = $1::text AND r.status = 'pending' AND r.token = $2::text
  RETURNING r.key
)
SELECT EXISTS (SELECT 1 FROM renewed) AS renewed
