-- prune: deletes up to $1 expired rows (one batch; the caller repeats until a batch
-- comes back short). Rows another session holds are skipped, and the expiry is checked
-- again on the row as deleted, so a row claimed meanwhile is kept.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), batch AS (
  SELECT t.key FROM {table} AS t, now
  WHERE t.status <> 'pending' AND t.expires_at <= now.ms
  LIMIT $1::bigint
  FOR UPDATE OF t SKIP LOCKED
)
DELETE FROM {table} AS d USING batch, now
WHERE d.key = batch.key
  AND d.status <> 'pending' AND d.expires_at <= now.ms
