//! The SQL of the store: one function per operation, each run on a connection that the
//! caller has already put in the right transaction state (the writer thread wraps every
//! write in `BEGIN IMMEDIATE`, so a read-then-write here is atomic across processes).

use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::claim::{decide, whole_ms, AcquireOutcome, AcquireRequest, Decision};
use crate::record::{NativeStats, Record, ReplayHit, COMPLETED, FAILED};
use crate::token::new_token;

pub const SCHEMA: &str = "
CREATE TABLE records (
  key              TEXT PRIMARY KEY NOT NULL,
  name             TEXT NOT NULL,
  fingerprint      TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
  token            TEXT,
  result           TEXT,
  error            TEXT,
  attempts         INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  expires_at       INTEGER,
  lease_expires_at INTEGER
);
CREATE INDEX records_by_expiry ON records (expires_at) WHERE expires_at IS NOT NULL;
";

const COLUMNS: &str = "key, name, fingerprint, status, token, result, error, attempts, \
                       created_at, updated_at, expires_at, lease_expires_at";

fn to_record(row: &Row<'_>) -> rusqlite::Result<Record> {
    Ok(Record {
        key: row.get(0)?,
        name: row.get(1)?,
        fingerprint: row.get(2)?,
        status: row.get(3)?,
        token: row.get(4)?,
        result: row.get(5)?,
        error: row.get(6)?,
        attempts: row.get(7)?,
        created_at: row.get(8)?,
        updated_at: row.get(9)?,
        expires_at: row.get(10)?,
        lease_expires_at: row.get(11)?,
    })
}

pub fn read(conn: &Connection, key: &str) -> rusqlite::Result<Option<Record>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM records WHERE key = ?1"))?;
    stmt.query_row([key], to_record).optional()
}

/// The replay fast path's read: the stored outcome (result, error, attempts) of `key`'s
/// record if it is completed, unexpired and made by a call with `fingerprint`; None for
/// anything else (the caller then takes the async path, which decides every other case).
/// Reads only the columns a replay needs, so nothing else is copied or converted.
pub fn read_replay(
    conn: &Connection,
    key: &str,
    fingerprint: &str,
    now: i64,
) -> rusqlite::Result<Option<ReplayHit>> {
    let mut stmt = conn.prepare_cached(
        "SELECT result, error, attempts FROM records
         WHERE key = ?1 AND status = 'completed' AND fingerprint = ?2
           AND (expires_at IS NULL OR expires_at > ?3)",
    )?;
    stmt.query_row(params![key, fingerprint, now], |row| {
        Ok(ReplayHit {
            result: row.get(0)?,
            error: row.get(1)?,
            attempts: row.get(2)?,
        })
    })
    .optional()
}

/// The atomic claim (see `claim.rs`). Must run inside a write transaction.
pub fn acquire(
    conn: &Connection,
    req: &AcquireRequest,
    now: i64,
) -> rusqlite::Result<AcquireOutcome> {
    let found = read(conn, &req.key)?;
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
    let expires_at = req.ttl_ms.map(|ttl| now + whole_ms(ttl));
    let lease_expires_at = now + whole_ms(req.lease_ms);
    let mut stmt = conn.prepare_cached(
        "INSERT INTO records (key, name, fingerprint, status, token, result, error, attempts,
                              created_at, updated_at, expires_at, lease_expires_at)
         VALUES (?1, ?2, ?3, 'pending', ?4, NULL, NULL, ?5, ?6, ?6, ?7, ?8)
         ON CONFLICT (key) DO UPDATE SET
           name = excluded.name, fingerprint = excluded.fingerprint, status = 'pending',
           token = excluded.token, result = NULL, error = NULL, attempts = excluded.attempts,
           created_at = CASE WHEN ?9 THEN excluded.created_at ELSE records.created_at END,
           updated_at = excluded.updated_at, expires_at = excluded.expires_at,
           lease_expires_at = excluded.lease_expires_at",
    )?;
    stmt.execute(params![
        req.key,
        req.name,
        req.fingerprint,
        token,
        attempts,
        now,
        expires_at,
        lease_expires_at,
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

/// Moves a pending record held under `token` to `status`. False when the token is no
/// longer the record's (the lease was taken over, the record retried or released).
#[allow(clippy::too_many_arguments)]
pub fn settle(
    conn: &Connection,
    key: &str,
    token: &str,
    status: &str,
    result: Option<&str>,
    error: Option<&str>,
    ttl_ms: Option<f64>,
    now: i64,
) -> rusqlite::Result<bool> {
    debug_assert!(status == COMPLETED || status == FAILED);
    let expires_at = ttl_ms.map(|ttl| now + whole_ms(ttl));
    let mut stmt = conn.prepare_cached(
        "UPDATE records SET status = ?3, result = ?4, error = ?5, token = NULL, updated_at = ?6,
                            expires_at = ?7, lease_expires_at = NULL
         WHERE key = ?1 AND token = ?2 AND status = 'pending'",
    )?;
    Ok(stmt.execute(params![key, token, status, result, error, now, expires_at])? == 1)
}

pub fn renew(
    conn: &Connection,
    key: &str,
    token: &str,
    lease_ms: f64,
    now: i64,
) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare_cached(
        "UPDATE records SET lease_expires_at = ?3 WHERE key = ?1 AND token = ?2 AND status = 'pending'",
    )?;
    Ok(stmt.execute(params![key, token, now + whole_ms(lease_ms)])? == 1)
}

/// An operator frees a stuck pending record: it becomes `failed`, so the next call runs,
/// and its token is dropped, so the stuck owner can no longer complete it.
pub fn release(conn: &Connection, key: &str, now: i64) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare_cached(
        "UPDATE records SET status = 'failed', token = NULL, lease_expires_at = NULL, updated_at = ?2,
                            error = '{\"name\":\"Released\",\"message\":\"released by an operator\"}'
         WHERE key = ?1 AND status = 'pending'",
    )?;
    Ok(stmt.execute(params![key, now])? == 1)
}

pub fn clear(conn: &Connection, key: Option<&str>) -> rusqlite::Result<u32> {
    let n = match key {
        Some(k) => conn
            .prepare_cached("DELETE FROM records WHERE key = ?1")?
            .execute([k])?,
        None => conn.execute("DELETE FROM records", [])?,
    };
    Ok(n as u32)
}

/// Deletes the records that count as never seen (see `Record::expired`).
pub fn prune(conn: &Connection, now: i64) -> rusqlite::Result<u32> {
    let n = conn.execute(
        "DELETE FROM records WHERE expires_at IS NOT NULL AND expires_at <= ?1
           AND NOT (status = 'pending' AND lease_expires_at > ?1)",
        [now],
    )?;
    Ok(n as u32)
}

pub fn list(
    conn: &Connection,
    status: Option<&str>,
    limit: Option<u32>,
    now: i64,
) -> rusqlite::Result<Vec<Record>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM records WHERE (?1 IS NULL OR status = ?1) ORDER BY created_at, key"
    ))?;
    let rows = stmt.query_map([status], to_record)?;
    let mut out = Vec::new();
    if limit == Some(0) {
        return Ok(out);
    }
    for row in rows {
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

pub fn stats(conn: &Connection, now: i64) -> rusqlite::Result<NativeStats> {
    let mut stats = NativeStats::default();
    let mut stmt = conn.prepare(&format!("SELECT {COLUMNS} FROM records"))?;
    for row in stmt.query_map([], to_record)? {
        stats.count(&row?, now);
    }
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    stats.size_bytes = Some((pages * page_size) as f64);
    Ok(stats)
}
