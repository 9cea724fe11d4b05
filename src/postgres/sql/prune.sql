-- prune: deletes up to $1 expired rows (one batch), the first ones in expiry order from
-- $2 on (epoch ms; the caller starts low and passes the greatest expires_at the last batch
-- returned, going on while a batch comes back full). Walking on from there instead of the
-- index's start keeps each batch's cost flat: the index entries of rows deleted by earlier
-- batches stay until vacuum, and a batch that started over walked all of them again
-- (1.7 s for 100k expired rows, 207 s for 1M). Rows another session holds are skipped,
-- and the expiry is checked again on the row as deleted, so a row claimed meanwhile is kept.
-- The batch's rows are deleted by their ctid (a Tid Scan: each row found again where the
-- batch read it). Joined on the key, each row was looked up again through the primary key
-- (4 of the 7 buffers a row cost): 497 ms for 100k expired rows and 4.98 s for 1M, now
-- 280-292 ms and 2.92-3.00 s (bench/scenarios/operations.js). The rows stay locked (FOR
-- UPDATE) from the batch's SELECT to the DELETE, one statement, so their ctids hold.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), batch AS (
  SELECT t.ctid FROM {table} AS t, now
  WHERE t.expires_at >= $2::bigint AND t.expires_at <= now.ms AND t.status <> 'pending'
  ORDER BY t.expires_at
  LIMIT $1::bigint
  FOR UPDATE OF t SKIP LOCKED
)
DELETE FROM {table} AS d USING now
WHERE d.ctid = ANY (ARRAY(SELECT ctid FROM batch))
  AND d.status <> 'pending' AND d.expires_at <= now.ms
RETURNING d.expires_at
