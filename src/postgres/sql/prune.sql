-- prune: deletes up to $1 expired rows (one batch), the first ones in expiry order from
-- $2 on (epoch ms; the caller starts low and passes the greatest expires_at the last batch
-- returned, going on while a batch comes back full). Walking on from there instead of the
-- index's start keeps each batch's cost flat: the index entries of rows deleted by earlier
-- batches stay until vacuum, and a batch that started over walked all of them again
-- (1.7 s for 100k expired rows, 207 s for 1M). Rows another session holds are skipped,
-- and the expiry is checked again on the row as deleted, so a row claimed meanwhile is kept.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), batch AS (
  SELECT t.key FROM {table} AS t, now
  WHERE t.expires_at >= $2::bigint AND t.expires_at <= now.ms AND t.status <> 'pending'
  ORDER BY t.expires_at
  LIMIT $1::bigint
  FOR UPDATE OF t SKIP LOCKED
)
DELETE FROM {table} AS d USING batch, now
WHERE d.key = batch.key
  AND d.status <> 'pending' AND d.expires_at <= now.ms
RETURNING d.expires_at
