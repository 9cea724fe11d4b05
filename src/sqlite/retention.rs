//! Retention: expired records are deleted, not only hidden. A settled record (`completed`
//! or `failed`) whose `expires_at` has passed is never seen again by any call, yet it kept
//! its result on disk; a `pending` record never expires (it is taken over), so it is
//! never deleted here.
//!
//! A store deletes them in passes of at most `PRUNE_BATCH` records, each its own short
//! `BEGIN IMMEDIATE` transaction (so other processes' writes interleave): one pass when it
//! opens, then one every `pruneIntervalMs` on the writer thread, sooner while passes come
//! back full. Every project's records in the file are pruned (an expired record counts as
//! absent for all of them). Pruning is best effort: a pass that fails (a full disk, a lock
//! held past the busy timeout) is tried again at the next interval, and never fails a call.

use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use crate::record::{COMPLETED, FAILED};

/// The most records one pass deletes.
pub const PRUNE_BATCH: u32 = 1000;

/// How often a store prunes by default.
pub const DEFAULT_PRUNE_INTERVAL: Duration = Duration::from_secs(60);

/// Deletes up to `limit` settled records whose `expires_at` is at or before `now_wall`
/// (epoch ms), in every project; returns how many. The caller holds no transaction.
pub fn prune_pass(conn: &Connection, now_wall: i64, limit: u32) -> rusqlite::Result<u32> {
    // A read first (the expiry index answers it): most passes find nothing, and then take
    // no write lock that other processes' writes would wait behind.
    let due: Option<i64> = conn
        .prepare_cached(
            "SELECT 1 FROM records
             WHERE expires_at IS NOT NULL AND expires_at <= ?1 AND status IN (?2, ?3) LIMIT 1",
        )?
        .query_row(params![now_wall, COMPLETED, FAILED], |r| r.get(0))
        .optional()?;
    if due.is_none() {
        return Ok(0);
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let deleted = conn
        .prepare_cached(
            "DELETE FROM records WHERE rowid IN (
               SELECT rowid FROM records
               WHERE expires_at IS NOT NULL AND expires_at <= ?1 AND status IN (?2, ?3)
               LIMIT ?4)",
        )
        .and_then(|mut stmt| stmt.execute(params![now_wall, COMPLETED, FAILED, limit]));
    match deleted {
        Ok(n) => {
            conn.execute_batch("COMMIT")?;
            Ok(n as u32)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Where an explicit prune's walk of the expiry index has got to: the `(expires_at, rowid)`
/// of the last record it visited.
pub type Mark = (i64, i64);

/// The walk's start: before every record.
pub const START: Mark = (i64::MIN, i64::MIN);

/// One pass of an explicit `prune()`.
pub struct WalkPass {
    pub deleted: u32,
    /// Where the next pass starts; `None` once the walk has reached the records that had
    /// not expired at `now_wall`.
    pub next: Option<Mark>,
}

/// One pass of `prune()`: visits at most `limit` records of the expiry index that had
/// expired at `now_wall`, after `after`, and deletes the settled ones of the project
/// `namespace` (every project's for `None`). Runs in the writer's transaction, so a pass
/// holds the write lock for at most `limit` deletions, and keeps only `limit` row ids in
/// memory. The walk goes on from its mark, not from the index's start: the records a
/// pass skips (pending ones, other projects') are not visited again by every later pass.
pub fn prune_walk(
    conn: &Connection,
    namespace: Option<&str>,
    now_wall: i64,
    after: Mark,
    limit: u32,
) -> rusqlite::Result<WalkPass> {
    let mut visited = Vec::with_capacity(limit as usize);
    {
        let mut stmt = conn.prepare_cached(
            "SELECT expires_at, rowid, status IN (?3, ?4) AND (?5 IS NULL OR namespace = ?5)
             FROM records
             WHERE expires_at IS NOT NULL AND expires_at <= ?1 AND (expires_at, rowid) > (?6, ?7)
             ORDER BY expires_at, rowid LIMIT ?2",
        )?;
        let rows = stmt.query_map(
            params![now_wall, limit, COMPLETED, FAILED, namespace, after.0, after.1],
            |r| {
                Ok((
                    (r.get::<_, i64>(0)?, r.get::<_, i64>(1)?),
                    r.get::<_, bool>(2)?,
                ))
            },
        )?;
        for row in rows {
            visited.push(row?);
        }
    }
    let mut delete = conn.prepare_cached("DELETE FROM records WHERE rowid = ?1")?;
    let mut deleted = 0;
    for ((_, rowid), doomed) in &visited {
        if *doomed {
            deleted += delete.execute(params![rowid])? as u32;
        }
    }
    let full = visited.len() >= limit as usize;
    Ok(WalkPass {
        deleted,
        next: visited.last().filter(|_| full).map(|(mark, _)| *mark),
    })
}

/// What the writer thread needs to prune: how often, and what a pass is.
pub struct Retention {
    pub interval: Duration,
}

impl Retention {
    /// One pass on `conn`; true when it came back full (more are waiting to be deleted).
    /// Failures are left for the next pass.
    pub fn pass(&self, conn: &Connection) -> bool {
        match prune_pass(conn, crate::clock::now_ms(), PRUNE_BATCH) {
            Ok(n) => n >= PRUNE_BATCH,
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::open::{self, Durability, Settings};

    fn store() -> Connection {
        let path = std::env::temp_dir()
            .join(format!(
                "idempotent-tools-rs-retention-{}-{}",
                std::process::id(),
                crate::token::new_token()
            ))
            .join("store.db");
        let settings = Settings {
            durability: Durability::Normal,
            busy_timeout: Duration::from_secs(5),
        };
        open::prepare_path(&path).unwrap();
        let conn = open::connect(&path, &settings).unwrap();
        open::initialize(&conn, &path, &settings).unwrap();
        conn
    }

    fn insert(conn: &Connection, ns: &str, key: &str, status: &str, expires_at: Option<i64>) {
        conn.execute(
            "INSERT INTO records (namespace, key, name, fingerprint, status, attempts, created_at,
                                  updated_at, expires_at, lease_expires_at, result)
             VALUES (?1, ?2, 'op', 'fp', ?3, 1, 0, 0, ?4, 1, '\"kept on disk\"')",
            params![ns, key, status, expires_at],
        )
        .unwrap();
    }

    fn keys(conn: &Connection) -> Vec<String> {
        let mut stmt = conn
            .prepare("SELECT namespace || '/' || key FROM records ORDER BY 1")
            .unwrap();
        let rows = stmt.query_map([], |r| r.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    }

    #[test]
    fn a_pass_deletes_settled_expired_records_of_every_project_and_at_most_its_limit() {
        let conn = store();
        for i in 0..5 {
            insert(&conn, "a", &format!("done-{i}"), COMPLETED, Some(100));
        }
        insert(&conn, "b", "failed", FAILED, Some(100));
        insert(&conn, "a", "fresh", COMPLETED, Some(10_000));
        insert(&conn, "a", "forever", COMPLETED, None);
        // Pending never expires: its owner's death is a take-over, not a deletion.
        insert(&conn, "a", "pending", "pending", Some(100));

        assert_eq!(prune_pass(&conn, 1_000, 4).unwrap(), 4);
        assert_eq!(prune_pass(&conn, 1_000, 4).unwrap(), 2);
        assert_eq!(prune_pass(&conn, 1_000, 4).unwrap(), 0);
        assert_eq!(keys(&conn), ["a/forever", "a/fresh", "a/pending"]);
        assert!(conn.is_autocommit());
    }

    #[test]
    fn a_walk_deletes_its_projects_settled_expired_records_and_goes_on_from_its_mark() {
        let conn = store();
        for i in 0..3 {
            insert(&conn, "a", &format!("done-{i}"), COMPLETED, Some(100 + i));
        }
        insert(&conn, "b", "other-project", COMPLETED, Some(100));
        insert(&conn, "a", "pending", "pending", Some(100));
        insert(&conn, "a", "fresh", COMPLETED, Some(10_000));

        // Five expired records in the index, two visited a pass.
        let first = prune_walk(&conn, Some("a"), 1_000, START, 2).unwrap();
        let mut deleted = first.deleted;
        let mut mark = first.next;
        let mut passes = 1;
        while let Some(after) = mark {
            let pass = prune_walk(&conn, Some("a"), 1_000, after, 2).unwrap();
            deleted += pass.deleted;
            mark = pass.next;
            passes += 1;
        }
        assert_eq!(deleted, 3);
        // Five records visited, each once: three passes (2, 2, 1), not one per deletion.
        assert_eq!(passes, 3);
        assert_eq!(keys(&conn), ["a/fresh", "a/pending", "b/other-project"]);
        // Every project's, for a store opened on all of them.
        assert_eq!(
            prune_walk(&conn, None, 1_000, START, 10).unwrap().deleted,
            1
        );
    }
}
