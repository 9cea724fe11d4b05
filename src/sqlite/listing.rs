//! The inspector's listing (the page, `inspect --follow`): the newest records that match,
//! filtered in the query, and without their results unless asked. Before, every refresh
//! read every record with its full result (115 MB for a page that shows one record).
//! Results come later, one record at a time, when its details are opened (`get`).

use rusqlite::{params, Connection};

use super::queries::{to_record, Scope, COLUMNS, SEEN_BY_SCOPE};
use crate::clock::Now;
use crate::record::Record;

pub struct Recent<'a> {
    pub status: Option<&'a str>,
    pub name: Option<&'a str>,
    /// Only records updated at or after this (epoch ms).
    pub updated_since: Option<i64>,
    pub limit: Option<u32>,
    pub with_results: bool,
}

/// The matching unexpired records, newest change first (ties by key), at most `limit`;
/// and how many matched in all.
pub fn recent(
    conn: &Connection,
    scope: &Scope,
    q: &Recent<'_>,
    now: &Now,
) -> rusqlite::Result<(Vec<Record>, u32)> {
    let columns = if q.with_results {
        COLUMNS.to_string()
    } else {
        // The result column is left unread (SQLite then never loads its overflow pages).
        let lean = COLUMNS.replacen(" result,", " NULL,", 1);
        debug_assert_ne!(lean, COLUMNS, "COLUMNS lists result");
        lean
    };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {columns} FROM records
         WHERE (?1 IS NULL OR status = ?1) AND {SEEN_BY_SCOPE}
           AND (?3 IS NULL OR name = ?3) AND (?4 IS NULL OR updated_at >= ?4)
         ORDER BY updated_at DESC, key, namespace"
    ))?;
    let mut out = Vec::new();
    let mut matched = 0u32;
    let rows = stmt.query_map(
        params![q.status, scope.filter(), q.name, q.updated_since],
        to_record,
    )?;
    for row in rows {
        let record = row?;
        if record.expired(now) {
            continue;
        }
        matched = matched.saturating_add(1);
        if q.limit.is_none_or(|l| out.len() < l as usize) {
            out.push(record);
        }
    }
    Ok((out, matched))
}
