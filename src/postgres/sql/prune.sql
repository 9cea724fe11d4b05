-- prune: deletes up to $1 expired rows (one batch; the caller repeats until a batch
-- comes back short). Only settled rows: a pending one never expires (it is taken over).
-- Rows another session holds are skipped, and the expiry is checked again on the row as
-- deleted, so a row claimed meanwhile is kept.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), batch AS (
  SELECT t.key FROM {table} AS t, now
  WHERE t.expires_at <= now.ms AND t.status IN ('completed', 'failed')
  LIMIT $1::bigint
  FOR UPDATE OF t SKIP LOCKED
)
DELETE FROM {table} AS d USING batch, now
WHERE d.key = batch.key
  AND d.expires_at <= now.ms AND d.status IN ('completed', 'failed')
