-- acquire: the claim rule of src/claim.rs for a batch of keys, one statement, atomic at
-- READ COMMITTED. A single claim (and idempotentTx's) is a batch of one.
-- $1 keys  $2 names  $3 fingerprints  $4 new tokens  $5 lease ms  $6 force ('retry')
-- $7 meta (JSON text or NULL): arrays of one length, one element per claim; the keys of
-- one batch are distinct (ON CONFLICT cannot touch one row twice in one statement).
-- A settled row past its expires_at counts as absent. A pending row never expires (its
-- expires_at is set when it settles): a dead owner's claim is always a takeover.
-- `cur` is each claim with its key's row as this statement's snapshot shows it (c_*,
-- NULL when there is none), and `refuses`: the claim rule applied to that row on this
-- statement's clock. When the row refuses the claim (completed, another fingerprint, a
-- live lease), nothing is inserted or locked: a replay only reads. Otherwise INSERT … ON
-- CONFLICT decides on the newest committed version of the row (waiting for a concurrent
-- writer), applying the same rule; rows are claimed in key order (bytes, COLLATE "C"), as
-- settle.sql, expire.sql and clear.sql lock theirs, so no two statements wait on each
-- other in a cycle.
-- The answer, by key (no order): a row with `acquired` for each claim made; a row with
-- `acquired` false and the record in the way, as the snapshot showed it, for each claim
-- the snapshot's row refused; and no row for a claim that was neither: its row appeared
-- or changed after the snapshot (a writer this statement waited for settled it), so the
-- snapshot's row is stale, never an answer (an expired record would be replayed): the
-- caller sends that claim again, with a new snapshot.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), cur AS (
  SELECT i.key, i.name, i.fingerprint, i.token, i.lease_ms, i.force, i.meta, now.ms AS now,
         c.name AS c_name, c.fingerprint AS c_fingerprint, c.status AS c_status, c.result AS c_result,
         c.error AS c_error, c.attempts AS c_attempts, c.created_at AS c_created_at,
         c.updated_at AS c_updated_at, c.expires_at AS c_expires_at,
         c.lease_expires_at AS c_lease_expires_at, c.meta AS c_meta, c.duration_ms AS c_duration_ms,
         NOT (c.status <> 'pending' AND coalesce(c.expires_at <= now.ms, false))
         AND c.status <> 'failed'
         AND (c.status = 'completed' OR c.fingerprint <> i.fingerprint
              OR (coalesce(c.lease_expires_at > now.ms, false) AND NOT i.force)) AS refuses
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::boolean[], $7::text[])
         AS i(key, name, fingerprint, token, lease_ms, force, meta)
  CROSS JOIN now
  LEFT JOIN {table} AS c ON c.key = i.key
), claimed AS (
  INSERT INTO {table} AS r (key, name, fingerprint, status, token, settled_token, result, error, attempts,
                            taken_over, created_at, updated_at, expires_at, lease_expires_at, meta, duration_ms)
  SELECT cur.key, cur.name, cur.fingerprint, 'pending', cur.token, NULL, NULL, NULL, 1,
         false, cur.now, cur.now, NULL, cur.now + cur.lease_ms, cur.meta, NULL
  FROM cur
  WHERE cur.refuses IS NOT TRUE -- no row (NULL), or one the rule lets this claim take
  ORDER BY cur.key COLLATE "C" -- the lock order of every statement that locks rows
  ON CONFLICT (key) DO UPDATE SET
    name = excluded.name,
    fingerprint = excluded.fingerprint,
    status = 'pending',
    token = excluded.token,
    settled_token = NULL,
    result = NULL,
    error = NULL,
    attempts = CASE
      WHEN r.status <> 'pending' AND coalesce(r.expires_at <= excluded.updated_at, false)
      THEN 1 ELSE r.attempts + 1 END,
    taken_over = r.status = 'pending'
      AND NOT coalesce(r.lease_expires_at > excluded.updated_at, false),
    created_at = CASE
      WHEN r.status <> 'pending' AND coalesce(r.expires_at <= excluded.updated_at, false)
      THEN excluded.created_at ELSE r.created_at END,
    updated_at = excluded.updated_at,
    expires_at = excluded.expires_at,
    lease_expires_at = excluded.lease_expires_at,
    meta = excluded.meta,
    duration_ms = NULL,
    watched = false
  WHERE (r.status <> 'pending' AND coalesce(r.expires_at <= excluded.updated_at, false))
     OR r.status = 'failed'
     OR (r.status = 'pending' AND r.fingerprint = excluded.fingerprint
         AND (NOT coalesce(r.lease_expires_at > excluded.updated_at, false)
              OR EXISTS (SELECT 1 FROM cur AS f WHERE f.key = excluded.key AND f.force)))
  RETURNING r.key, r.attempts, r.taken_over
)
SELECT claimed.key, true AS acquired, claimed.attempts, claimed.taken_over,
       NULL::text AS name, NULL::text AS fingerprint, NULL::text AS status, NULL::text AS result,
       NULL::text AS error, NULL::bigint AS created_at, NULL::bigint AS updated_at,
       NULL::bigint AS expires_at, NULL::bigint AS lease_expires_at, NULL::text AS meta,
       NULL::double precision AS duration_ms
FROM claimed
UNION ALL
SELECT cur.key, false, cur.c_attempts, false,
       cur.c_name, cur.c_fingerprint, cur.c_status, cur.c_result,
       cur.c_error, cur.c_created_at, cur.c_updated_at,
       cur.c_expires_at, cur.c_lease_expires_at, cur.c_meta,
       cur.c_duration_ms
FROM cur
WHERE cur.refuses
