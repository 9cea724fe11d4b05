-- complete / fail for a batch of claims: only the holder of a current claim may settle it.
-- A single settle (and idempotentTx's) is a batch of one.
-- $1 keys  $2 tokens  $3 'completed' or 'failed'  $4 result texts  $5 error texts
-- $6 ttl ms (NULL: none)  $7 duration ms: arrays of one length; the keys are distinct.
-- The answer, by key (no order): `settled` true for each claim this statement settled;
-- for each claim whose row this statement's snapshot did not show pending under its
-- token, `settled` says whether this very settle was applied before (its reply lost with
-- a connection); and no row for a claim that was neither: the snapshot showed it pending
-- under its token, yet the UPDATE (which decides on the newest version of the row) did
-- not settle it: the row changed after the snapshot (the UPDATE waited for its writer,
-- perhaps this very settle's first attempt), so the snapshot cannot tell whether this
-- settle was applied: the caller sends it again, with a new snapshot.
-- Settling a claim that a 'block' waiter marked (watch.sql) sends NOTIFY (delivered at
-- commit), so the waiter looks again at once; unwatched settles send none (NOTIFY
-- serialises commits server-wide). The payload is the claim's tag (SHA-256 of its token,
-- which watch.sql gave the waiter), never the key: any role that can connect may LISTEN,
-- with no privilege on the table, and keys are derived from arguments or are business ids.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::double precision[])
    AS i(key, token, status, result, error, ttl_ms, duration_ms)
), locked AS (
  -- The rows to settle, locked in key order before any is changed: acquire.sql claims
  -- in that order too, so a settle and a claim of the same rows never wait on each other
  -- in a cycle (an UPDATE alone locks in whatever order its plan meets the rows).
  SELECT r.key FROM {table} AS r JOIN input AS i ON r.key = i.key
  WHERE r.status = 'pending' AND r.token = i.token
  ORDER BY r.key COLLATE "C"
  FOR UPDATE OF r
), settled AS (
  UPDATE {table} AS r
  SET status = i.status, token = NULL, settled_token = i.token, result = i.result, error = i.error,
      updated_at = now.ms, expires_at = now.ms + i.ttl_ms, lease_expires_at = NULL,
      duration_ms = i.duration_ms
  FROM input AS i, now, locked AS l
  WHERE r.key = i.key AND l.key = i.key AND r.status = 'pending' AND r.token = i.token
  RETURNING r.key, r.watched, i.token
), notified AS (
  SELECT pg_notify('{channel}', encode(sha256(convert_to(settled.token, 'UTF8')), 'hex'))
  FROM settled
  WHERE settled.watched
)
SELECT settled.key, true AS settled, (SELECT count(*) FROM notified) AS notified
FROM settled
UNION ALL
SELECT i.key,
       coalesce(p.status = i.status AND p.settled_token = i.token
                AND p.result IS NOT DISTINCT FROM i.result AND p.error IS NOT DISTINCT FROM i.error, false),
       0
FROM input AS i
LEFT JOIN {table} AS p ON p.key = i.key
WHERE NOT coalesce(p.status = 'pending' AND p.token = i.token, false)
