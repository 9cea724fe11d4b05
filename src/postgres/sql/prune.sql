-- prune: deletes up to $1 expired rows (one batch; the caller repeats until a batch
-- comes back short). Rows another session holds are skipped, and the expiry is checked
-- again on the row as deleted, so a row claimed meanwhile is kept.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), batch AS (
  SELECT t.key FROM {table} AS t, now
  WHERE t.expires_at <= now.ms AND NOT (t.status = 'pending' AND coalesce(t.lease_expires_at > now.ms, false))
  LIMIT $1::bigint
  FOR UPDATE OF t SKIP LOCKED
)
DELETE FROM {table} AS d USING batch, now
WHERE d.key = batch.key
  AND d.expires_at <= now.ms AND NOT (d.status = 'pending' AND coalesce(d.lease_expires_at > now.ms, false))
