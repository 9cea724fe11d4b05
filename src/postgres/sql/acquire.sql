-- acquire: the claim rule of src/claim.rs, one statement, atomic at READ COMMITTED.
-- $1 key  $2 name  $3 fingerprint  $4 new token  $5 lease ms  $6 force ('retry')
-- $7 meta (JSON text or NULL)
-- A settled row past its expires_at counts as absent. A pending row never expires (its
-- expires_at is set when it settles): a dead owner's claim is always a takeover.
-- `cur` is the row as this statement's snapshot shows it. When that row refuses the claim
-- for sure (completed, another fingerprint, a live lease), nothing is inserted or locked:
-- a replay only reads. Otherwise INSERT … ON CONFLICT decides on the newest committed
-- version of the row (waiting for a concurrent writer), applying the same rule.
-- Rows: one `claimed` row, or one `found` row (the record in the way, as the snapshot
-- showed it), or none (a concurrent writer changed the row after the snapshot: the
-- caller sends the statement again).
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), cur AS (
  SELECT c.* FROM {table} AS c WHERE c.key = $1::text
), claimed AS (
  INSERT INTO {table} AS r (key, name, fingerprint, status, token, settled_token, result, error, attempts,
                            taken_over, created_at, updated_at, expires_at, lease_expires_at, meta, duration_ms)
  SELECT $1::text, $2::text, $3::text, 'pending', $4::text, NULL, NULL, NULL, 1,
         false, now.ms, now.ms, NULL, now.ms + $5::bigint, $7::text, NULL
  FROM now
  WHERE NOT EXISTS (
    SELECT 1 FROM cur
    WHERE NOT (cur.status <> 'pending' AND coalesce(cur.expires_at <= now.ms, false))
      AND cur.status <> 'failed'
      AND (cur.status = 'completed' OR cur.fingerprint <> $3::text
           OR (coalesce(cur.lease_expires_at > now.ms, false) AND NOT $6::boolean))
  )
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
         AND (NOT coalesce(r.lease_expires_at > excluded.updated_at, false) OR $6::boolean))
  RETURNING r.attempts, r.taken_over
)
SELECT true AS acquired, claimed.attempts, claimed.taken_over, now.ms AS now,
       NULL::text AS name, NULL::text AS fingerprint, NULL::text AS status, NULL::text AS result,
       NULL::text AS error, NULL::bigint AS created_at, NULL::bigint AS updated_at,
       NULL::bigint AS expires_at, NULL::bigint AS lease_expires_at, NULL::text AS meta,
       NULL::double precision AS duration_ms
FROM claimed, now
UNION ALL
SELECT false, cur.attempts, false, now.ms,
       cur.name, cur.fingerprint, cur.status, cur.result,
       cur.error, cur.created_at, cur.updated_at,
       cur.expires_at, cur.lease_expires_at, cur.meta,
       cur.duration_ms
FROM cur, now
WHERE NOT EXISTS (SELECT 1 FROM claimed)
