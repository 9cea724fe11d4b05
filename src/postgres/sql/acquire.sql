-- acquire: the claim rule of src/claim.rs for a batch of keys, one statement, atomic at
-- READ COMMITTED. A single claim (and idempotentTx's) is a batch of one.
-- $1 keys  $2 names  $3 fingerprints  $4 new tokens  $5 lease ms  $6 force ('retry')
-- $7 meta (JSON text or NULL): arrays of one length, one element per claim; the keys of
-- one batch are distinct (ON CONFLICT cannot touch one row twice in one statement).
-- A settled row past its expires_at counts as absent. A pending row never expires (its
-- expires_at is set when it settles): a dead owner's claim is always a takeover.
-- `cur` is each key's row as this statement's snapshot shows it, and `refuses` the claim
-- rule applied to it on this statement's clock. When that row refuses the claim
-- (completed, another fingerprint, a live lease), nothing is inserted or locked: a replay
-- only reads. Otherwise INSERT … ON CONFLICT decides on the newest committed version of
-- the row (waiting for a concurrent writer), applying the same rule; rows are claimed in
-- key order, so two batches never wait on each other in a cycle.
-- One row per claim, in the order given (`n`): `acquired`; or `refused` with the record
-- in the way as the snapshot showed it; or neither: the row appeared or changed after the
-- snapshot (a writer this statement waited for settled it), and the snapshot's row is
-- stale, never an answer (an expired record would be replayed): the caller sends that
-- claim again, with a new snapshot.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::boolean[], $7::text[])
    WITH ORDINALITY AS i(key, name, fingerprint, token, lease_ms, force, meta, n)
), cur AS (
  SELECT i.n, c.*,
         NOT (c.status <> 'pending' AND coalesce(c.expires_at <= now.ms, false))
         AND c.status <> 'failed'
         AND (c.status = 'completed' OR c.fingerprint <> i.fingerprint
              OR (coalesce(c.lease_expires_at > now.ms, false) AND NOT i.force)) AS refuses
  FROM input AS i JOIN {table} AS c ON c.key = i.key CROSS JOIN now
), claimed AS (
  INSERT INTO {table} AS r (key, name, fingerprint, status, token, settled_token, result, error, attempts,
                            taken_over, created_at, updated_at, expires_at, lease_expires_at, meta, duration_ms)
  SELECT i.key, i.name, i.fingerprint, 'pending', i.token, NULL, NULL, NULL, 1,
         false, now.ms, now.ms, NULL, now.ms + i.lease_ms, i.meta, NULL
  FROM input AS i, now
  WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.n = i.n AND cur.refuses)
  ORDER BY i.key
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
              OR EXISTS (SELECT 1 FROM input AS f WHERE f.key = excluded.key AND f.force)))
  RETURNING r.key, r.attempts, r.taken_over
)
SELECT i.n, claimed.key IS NOT NULL AS acquired, coalesce(cur.refuses, false) AS refused,
       coalesce(claimed.attempts, cur.attempts) AS attempts, coalesce(claimed.taken_over, false) AS taken_over,
       cur.name, cur.fingerprint, cur.status, cur.result,
       cur.error, cur.created_at, cur.updated_at,
       cur.expires_at, cur.lease_expires_at, cur.meta,
       cur.duration_ms
FROM input AS i
LEFT JOIN claimed ON claimed.key = i.key
LEFT JOIN cur ON cur.n = i.n
ORDER BY i.n
