//! The SQL of the store: one function per operation, each run on a connection that the
//! caller has already put in the right transaction state (the writer thread wraps every
//! write in `BEGIN IMMEDIATE`, so a read-then-write here is atomic across processes).
//!
//! Every record belongs to a project (`namespace`): a store reads and writes only its
//! own project's records, so two projects sharing one file never meet. A store opened
//! for every project (`Scope::Every`, the CLI's view of a file) can read, clear and
//! release, but not claim.

use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::claim::{decide, whole_ms, AcquireOutcome, AcquireRequest, Decision};
use crate::clock::Now;
use crate::record::{LeaseDeadline, NativeStats, Record, ReplayHit, COMPLETED, FAILED};
use crate::token::{new_token, RELEASED_TOKEN};

/// Which records a store sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One project's records (`''` for a store opened without a namespace).
    Project(String),
    /// Every project's (inspection only).
    Every,
}

impl Scope {
    /// The namespace to filter on; `None` for every project.
    pub(super) fn filter(&self) -> Option<&str> {
        match self {
            Scope::Project(ns) => Some(ns),
            Scope::Every => None,
        }
    }
}

/// The rows a scope sees, as a WHERE condition on `records` with the namespace as `?2`:
/// a project's own records, and the records of the namespace `''` that it honours (see
/// `read_legacy`) where it has none of its own under that key, so that what `inspect`
/// and `stats` show is what a call in that project would see.
pub(super) const SEEN_BY_SCOPE: &str = "(?2 IS NULL OR records.namespace = ?2
     OR (?2 <> '' AND records.namespace = ''
         AND NOT EXISTS (SELECT 1 FROM records AS own WHERE own.namespace = ?2 AND own.key = records.key)))";

pub(super) const COLUMNS: &str = "namespace, key, name, fingerprint, status, token, result, error, attempts, \
                       created_at, updated_at, expires_at, lease_expires_at, lease_clock, lease_until, \
                       meta, duration_ms";

pub(super) fn to_record(row: &Row<'_>) -> rusqlite::Result<Record> {
    let lease_clock: Option<String> = row.get(13)?;
    let lease_until: Option<i64> = row.get(14)?;
    Ok(Record {
        namespace: Some(row.get(0)?),
        key: row.get(1)?,
        name: row.get(2)?,
        fingerprint: row.get(3)?,
        status: row.get(4)?,
        token: row.get(5)?,
        result: row.get(6)?,
        error: row.get(7)?,
        attempts: row.get(8)?,
        created_at: row.get(9)?,
        updated_at: row.get(10)?,
        expires_at: row.get(11)?,
        lease_expires_at: row.get(12)?,
        lease_until: lease_clock
            .zip(lease_until)
            .map(|(clock, at)| LeaseDeadline { clock, at }),
        meta: row.get(15)?,
        duration_ms: row.get(16)?,
    })
}

/// The key's record; for `Scope::Every`, the first project's (in namespace order).
pub fn read(conn: &Connection, scope: &Scope, key: &str) -> rusqlite::Result<Option<Record>> {
    match scope {
        Scope::Project(ns) => conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM records WHERE namespace = ?1 AND key = ?2"
            ))?
            .query_row(params![ns, key], to_record)
            .optional(),
        Scope::Every => conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM records WHERE key = ?1 ORDER BY namespace LIMIT 1"
            ))?
            .query_row([key], to_record)
            .optional(),
    }
}

/// A record from before namespaces, for a project's store that has none of its own under
/// `key`. Files written by version 1 keep their records in the namespace `''`; a project's
/// default store still honours them (replays a completed one, waits for a live pending
/// one), so upgrading never makes a finished call run again. Its own records come first,
/// and new claims are always made in its own namespace.
pub fn read_legacy(conn: &Connection, ns: &str, key: &str) -> rusqlite::Result<Option<Record>> {
    if ns.is_empty() {
        return Ok(None);
    }
    read(conn, &Scope::Project(String::new()), key)
}

/// The replay fast path's read: the stored outcome (result, error, attempts) of `key`'s
/// record if it is completed, unexpired and made by a call with `fingerprint`; None for
/// anything else (the caller then takes the async path, which decides every other case).
/// Reads only the columns a replay needs, so nothing else is copied or converted.
pub fn read_replay(
    conn: &Connection,
    ns: &str,
    key: &str,
    fingerprint: &str,
    now: i64,
) -> rusqlite::Result<Option<ReplayHit>> {
    let mut stmt = conn.prepare_cached(
        "SELECT result, error, attempts FROM records
         WHERE namespace = ?1 AND key = ?2 AND status = 'completed' AND fingerprint = ?3
           AND (expires_at IS NULL OR expires_at > ?4)",
    )?;
    stmt.query_row(params![ns, key, fingerprint, now], |row| {
        Ok(ReplayHit {
            result: row.get(0)?,
            error: row.get(1)?,
            attempts: row.get(2)?,
        })
    })
    .optional()
}

/// The lease columns for a lease of `lease_ms` from `now`: the wall-clock deadline (shown)
/// and the monotonic one (decides), when the host has a monotonic lease clock.
fn lease_columns(now: &Now, lease_ms: f64) -> (i64, Option<&str>, Option<i64>) {
    let ms = whole_ms(lease_ms);
    let clock = now.lease.as_ref();
    // The shown (wall) deadline is never earlier than the monotonic one that decides: the
    // two clocks are read in whole ms a moment apart, so one more ms. A caller that waits
    // for the wall clock to pass `leaseExpiresAt` then always finds the lease over.
    let shown = if clock.is_some() {
        now.wall + ms + 1
    } else {
        now.wall + ms
    };
    (shown, clock.map(|c| c.id), clock.map(|c| c.ms + ms))
}

/// The atomic claim (see `claim.rs`). Must run inside a write transaction.
pub fn acquire(
    conn: &Connection,
    ns: &str,
    req: &AcquireRequest,
    now: &Now,
) -> rusqlite::Result<AcquireOutcome> {
    // Another call's legacy record is not this call's: claim in this project.
    let legacy = read_legacy(conn, ns, &req.key)?.filter(|r| r.fingerprint == req.fingerprint);
    if legacy.is_none() {
        // A key never seen (the common case of a new call) is claimed by one INSERT that
        // does nothing when the row exists: `decide` on no record is always a fresh claim
        // (attempts 1), so the record need not be read first. A row that exists is
        // decided by the full rule below.
        if let Some(claimed) = claim_new(conn, ns, req, now)? {
            return Ok(claimed);
        }
    }
    let found = match read(conn, &Scope::Project(ns.to_string()), &req.key)? {
        Some(own) => Some(own),
        None => legacy,
    };
    let (attempts, taken_over, fresh) =
        match decide(found.as_ref(), &req.fingerprint, req.force, now) {
            Decision::Refuse => {
                return Ok(AcquireOutcome {
                    acquired: false,
                    token: None,
                    attempts: found.as_ref().map_or(0, |r| r.attempts),
                    taken_over: false,
                    record: found.map(Into::into),
                })
            }
            Decision::Claim {
                attempts,
                taken_over,
                fresh,
            } => (attempts, taken_over, fresh),
        };
    let token = new_token();
    // A pending record carries no expiry: `ttlMs` counts from the settle (see `Record::expired`).
    let expires_at: Option<i64> = None;
    let (lease_expires_at, lease_clock, lease_until) = lease_columns(now, req.lease_ms);
    let mut stmt = conn.prepare_cached(
        "INSERT INTO records (namespace, key, name, fingerprint, status, token, result, error, attempts,
                              created_at, updated_at, expires_at, lease_expires_at, lease_clock,
                              lease_until, meta, duration_ms)
         VALUES (?1, ?2, ?3, ?4, 'pending', ?5, NULL, NULL, ?6, ?7, ?7, ?8, ?9, ?10, ?11, ?12, NULL)
         ON CONFLICT (namespace, key) DO UPDATE SET
           name = excluded.name, fingerprint = excluded.fingerprint, status = 'pending',
           token = excluded.token, result = NULL, error = NULL, attempts = excluded.attempts,
           created_at = CASE WHEN ?13 THEN excluded.created_at ELSE records.created_at END,
           updated_at = excluded.updated_at, expires_at = excluded.expires_at,
           lease_expires_at = excluded.lease_expires_at, lease_clock = excluded.lease_clock,
           lease_until = excluded.lease_until, meta = excluded.meta, duration_ms = NULL",
    )?;
    stmt.execute(params![
        ns,
        req.key,
        req.name,
        req.fingerprint,
        token,
        attempts,
        now.wall,
        expires_at,
        lease_expires_at,
        lease_clock,
        lease_until,
        req.meta,
        fresh
    ])?;
    Ok(AcquireOutcome {
        acquired: true,
        token: Some(token),
        attempts,
        taken_over,
        record: None,
    })
}

/// Claims `req.key` as `acquire` claims a key with no record (attempts 1, not taken over);
/// None, writing nothing, when the project has a record under the key.
fn claim_new(
    conn: &Connection,
    ns: &str,
    req: &AcquireRequest,
    now: &Now,
) -> rusqlite::Result<Option<AcquireOutcome>> {
    let token = new_token();
    let (lease_expires_at, lease_clock, lease_until) = lease_columns(now, req.lease_ms);
    let mut stmt = conn.prepare_cached(
        "INSERT INTO records (namespace, key, name, fingerprint, status, token, result, error, attempts,
                              created_at, updated_at, expires_at, lease_expires_at, lease_clock,
                              lease_until, meta, duration_ms)
         VALUES (?1, ?2, ?3, ?4, 'pending', ?5, NULL, NULL, 1, ?6, ?6, NULL, ?7, ?8, ?9, ?10, NULL)
         ON CONFLICT (namespace, key) DO NOTHING",
    )?;
    let inserted = stmt.execute(params![
        ns,
        req.key,
        req.name,
        req.fingerprint,
        token,
        now.wall,
        lease_expires_at,
        lease_clock,
        lease_until,
        req.meta,
    ])?;
    Ok((inserted == 1).then_some(AcquireOutcome {
        acquired: true,
        token: Some(token),
        attempts: 1,
        taken_over: false,
        record: None,
    }))
}

/// What a settle writes.
pub struct Settle<'a> {
    pub key: &'a str,
    pub token: &'a str,
    pub status: &'static str,
    pub result: Option<&'a str>,
    pub error: Option<&'a str>,
    pub ttl_ms: Option<f64>,
    pub duration_ms: Option<f64>,
}

/// Moves a pending record held under `token` to `status`. False when the token is no
/// longer the record's (the lease was taken over, the record retried or released).
pub fn settle(conn: &Connection, ns: &str, s: &Settle<'_>, now: &Now) -> rusqlite::Result<bool> {
    debug_assert!(s.status == COMPLETED || s.status == FAILED);
    let expires_at = s.ttl_ms.map(|ttl| now.wall + whole_ms(ttl));
    let duration = s
        .duration_ms
        .filter(|d| d.is_finite() && *d >= 0.0)
        .map(|d| d.round().min(i64::MAX as f64) as i64);
    let mut stmt = conn.prepare_cached(
        "UPDATE records SET status = ?4, result = ?5, error = ?6, token = NULL, updated_at = ?7,
                            expires_at = ?8, lease_expires_at = NULL, lease_clock = NULL,
                            lease_until = NULL, duration_ms = ?9
         WHERE namespace = ?1 AND key = ?2 AND token = ?3 AND status = 'pending'",
    )?;
    Ok(stmt.execute(params![
        ns, s.key, s.token, s.status, s.result, s.error, now.wall, expires_at, duration
    ])? == 1)
}

pub fn renew(
    conn: &Connection,
    ns: &str,
    key: &str,
    token: &str,
    lease_ms: f64,
    now: &Now,
) -> rusqlite::Result<bool> {
    let (lease_expires_at, lease_clock, lease_until) = lease_columns(now, lease_ms);
    let mut stmt = conn.prepare_cached(
        "UPDATE records SET lease_expires_at = ?4, lease_clock = ?5, lease_until = ?6
         WHERE namespace = ?1 AND key = ?2 AND token = ?3 AND status = 'pending'",
    )?;
    Ok(stmt.execute(params![
        ns,
        key,
        token,
        lease_expires_at,
        lease_clock,
        lease_until
    ])? == 1)
}

/// An operator frees a stuck pending record. Its token is replaced by one no claim can
/// have, so the stuck owner can no longer renew or settle it (fenced). With `reconcile`
/// (the default of the CLI and the Store method) the record stays pending with its lease
/// run out: a claim nobody holds, which the next call takes over exactly as it takes over
/// a dead owner's (attempts + 1, `takenOver`, `reconcile` asked), because the released
/// attempt may have had its effect. Without, it becomes `failed`: the next call runs.
pub fn release(
    conn: &Connection,
    scope: &Scope,
    key: &str,
    now: i64,
    reconcile: bool,
) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare_cached(
        "UPDATE records SET token = ?4, lease_clock = NULL, lease_until = NULL, updated_at = ?3,
                            status = CASE WHEN ?5 THEN 'pending' ELSE 'failed' END,
                            lease_expires_at = CASE WHEN ?5 THEN ?3 ELSE NULL END,
                            error = CASE WHEN ?5 THEN error
                              ELSE '{\"name\":\"Released\",\"message\":\"released by an operator\"}' END
         WHERE (?1 IS NULL OR namespace = ?1) AND key = ?2 AND status = 'pending'",
    )?;
    let token = reconcile.then_some(RELEASED_TOKEN);
    Ok(stmt.execute(params![scope.filter(), key, now, token, reconcile])? >= 1)
}

/// Gives the settled records among `keys` the expiry `expires_at` (a step's record expires
/// with its completed call, see `lib/core/step.ts`); a pending record is left alone (it
/// never expires while unresolved). Returns how many records changed.
pub fn expire_settled(
    conn: &Connection,
    ns: &str,
    keys: &[String],
    expires_at: i64,
) -> rusqlite::Result<u32> {
    let mut stmt = conn.prepare_cached(
        "UPDATE records SET expires_at = ?3
         WHERE namespace = ?1 AND key = ?2 AND status <> 'pending'",
    )?;
    let mut changed = 0;
    for key in keys {
        changed += stmt.execute(params![ns, key, expires_at])? as u32;
    }
    Ok(changed)
}

pub fn clear(conn: &Connection, scope: &Scope, key: Option<&str>) -> rusqlite::Result<u32> {
    let n = match (scope, key) {
        (Scope::Project(ns), Some(k)) => conn
            .prepare_cached("DELETE FROM records WHERE namespace = ?1 AND key = ?2")?
            .execute(params![ns, k])?,
        (Scope::Every, Some(k)) => conn
            .prepare_cached("DELETE FROM records WHERE key = ?1")?
            .execute([k])?,
        (scope, None) => conn.execute(
            "DELETE FROM records WHERE ?1 IS NULL OR namespace = ?1",
            [scope.filter()],
        )?,
    };
    Ok(n as u32)
}

pub fn list(
    conn: &Connection,
    scope: &Scope,
    status: Option<&str>,
    limit: Option<u32>,
    now: &Now,
) -> rusqlite::Result<Vec<Record>> {
    let mut out = Vec::new();
    if limit == Some(0) {
        return Ok(out);
    }
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM records WHERE (?1 IS NULL OR status = ?1) AND {SEEN_BY_SCOPE}
         ORDER BY created_at, namespace, key"
    ))?;
    for row in stmt.query_map(params![status, scope.filter()], to_record)? {
        let record = row?;
        if record.expired(now) {
            continue;
        }
        out.push(record);
        if limit.is_some_and(|l| out.len() >= l as usize) {
            break;
        }
    }
    Ok(out)
}

pub fn stats(conn: &Connection, scope: &Scope, now: &Now) -> rusqlite::Result<NativeStats> {
    let mut stats = NativeStats::default();
    // Counts need no results: the column is left unread (its overflow pages too).
    let lean = COLUMNS.replacen(" result,", " NULL,", 1);
    let mut stmt = conn.prepare(&format!("SELECT {lean} FROM records WHERE {SEEN_BY_SCOPE}"))?;
    // ?1 is not used here (SEEN_BY_SCOPE names the namespace ?2, as in `list`).
    for row in stmt.query_map(params![None::<&str>, scope.filter()], to_record)? {
        stats.count(&row?, now);
    }
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    stats.size_bytes = Some((pages * page_size) as f64);
    Ok(stats)
}
