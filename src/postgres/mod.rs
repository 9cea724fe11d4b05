//! `PostgresStore`'s native half: the same method surface as the other native stores, so
//! one TypeScript wrapper drives it.
//!
//! - One row per key in one table (`sql/schema.sql`), its schema version in the table's
//!   comment. The table is created on first use when the role may (else `migrate`).
//! - `acquire`, `renew`, `complete`/`fail` and `release` are each one statement
//!   (`sql/*.sql`), atomic at READ COMMITTED, fenced by token, timed by the server's
//!   clock. A refused acquire returns the record in the way in the same reply, so a replay
//!   is one round trip and a new call two (acquire, complete).
//! - `ttlMs` is `expires_at`: every statement treats an expired row as absent; `prune`
//!   deletes them in batches.
//! - Settles send NOTIFY with the claim's tag, never its key; `nextSettled` hands the tags
//!   to JavaScript (see `listen.rs`).

mod listen;
mod pool;
pub mod sql;
mod target;
#[cfg(test)]
mod tests;

use futures_util::TryStreamExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use tokio_postgres::Row;

use crate::batch_reply::{AcquireReply, SettleReply};
use crate::claim::{whole_ms, AcquireOutcome, AcquireRequest};
use crate::failure::{guarded, StoreFailure, StoreResult};
use crate::record::{
    NativeRecord, NativeStats, RecentQuery, RecentRecords, SettleRequest, COMPLETED,
};
use crate::token::new_token;
use listen::Listening;
use pool::Pool;
use sql::{Table, DEFAULT_TABLE, PRUNE_BATCH};
use target::Target;

pub const DEFAULT_CONNECT_TIMEOUT_MS: f64 = 2000.0;
pub const DEFAULT_COMMAND_TIMEOUT_MS: f64 = 5000.0;
const DEFAULT_POOL_SIZE: u32 = 4;
/// How often an acquire or a settle is sent again when a concurrent writer changed the row
/// after the statement's snapshot (each try takes a new snapshot, so this is rarely more
/// than 1), or when the statement was a deadlock's victim.
const SEND_TRIES: usize = 8;
/// The most full batches one `prune()` deletes (10 million rows): see `prune`.
const MAX_PRUNE_BATCHES: u32 = 10_000;
/// A batch of prune that the server says deleted `n` rows, more than it asked for.
fn over_batch(n: u64) -> String {
    format!(
        "the server says a batch of prune deleted {n} rows, more than the {PRUNE_BATCH} it \
         asks for:{BROKEN_SERVER}"
    )
}

/// What an error about a reply no PostgreSQL would send says about its cause.
const BROKEN_SERVER: &str = " a broken or hostile server, or a proxy in front of it, that \
    would keep prune going forever, so it stopped. Check what answers at this address";

#[napi(object)]
pub struct PostgresOptions {
    /// `postgres://[user[:password]@]host[:port]/database[?sslmode=…]`.
    pub url: String,
    /// `name` or `schema.name`; default `idempotent_tools_records`.
    pub table: Option<String>,
    /// Connections in the pool; default 4.
    pub pool_size: Option<u32>,
    /// Bound on opening a connection; default 2000.
    pub connect_timeout_ms: Option<f64>,
    /// Bound on each statement's reply; default 5000.
    pub command_timeout_ms: Option<f64>,
    /// False: never create the table (it must have been made by `migrate`). Default true.
    pub create_table: Option<bool>,
}

fn attempts_of(n: i32) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(0)
}

/// `acquire.sql`'s record in the way: its columns from `at` on (name … duration_ms), with
/// the key given.
fn record_at(row: &Row, key: String, at: usize) -> NativeRecord {
    let ms = |i: usize| row.get::<_, Option<i64>>(i).map(|t| t as f64);
    NativeRecord {
        key,
        name: row.get(at),
        fingerprint: row.get(at + 1),
        status: row.get(at + 2),
        result: row.get(at + 3),
        error: row.get(at + 4),
        attempts: 0,
        created_at: ms(at + 5).unwrap_or(0.0),
        updated_at: ms(at + 6).unwrap_or(0.0),
        expires_at: ms(at + 7),
        lease_expires_at: ms(at + 8),
        namespace: None,
        meta: row.get(at + 9),
        duration_ms: row.get(at + 10),
    }
}

fn record_row(row: &Row) -> NativeRecord {
    // key, name, fingerprint, status, result, error, attempts, created_at, updated_at,
    // expires_at, lease_expires_at, meta, duration_ms
    let ms = |i: usize| row.get::<_, Option<i64>>(i).map(|t| t as f64);
    NativeRecord {
        key: row.get(0),
        name: row.get(1),
        fingerprint: row.get(2),
        status: row.get(3),
        result: row.get(4),
        error: row.get(5),
        attempts: attempts_of(row.get(6)),
        created_at: ms(7).unwrap_or(0.0),
        updated_at: ms(8).unwrap_or(0.0),
        expires_at: ms(9),
        lease_expires_at: ms(10),
        namespace: None,
        meta: row.get(11),
        duration_ms: row.get(12),
    }
}

/// PostgreSQL text cannot hold U+0000: say so, instead of the server's encoding error. A
/// batch's statement carries every request of its round, and one string the server refuses
/// would fail them all: so every text field of each request is checked first, and a request
/// that fails is answered alone. (The TypeScript side refuses these before they are sent,
/// as TypeErrors: lib/stores/postgres-store.ts, `postgresText`.)
fn check_text(what: &str, value: &str) -> StoreResult<()> {
    if value.contains('\0') {
        return Err(StoreFailure::new(format!(
            "PostgresStore cannot store a {what} that contains the character U+0000 (PostgreSQL text cannot hold it); \
             use another {what}"
        )));
    }
    Ok(())
}

/// The only answer of a batch of one.
/// `check_text` on each present field of a request.
fn check_texts(fields: &[(&str, Option<&str>)]) -> StoreResult<()> {
    for (what, value) in fields {
        if let Some(value) = value {
            check_text(what, value)?;
        }
    }
    Ok(())
}

fn one<T>(mut answers: Vec<StoreResult<T>>) -> StoreResult<T> {
    answers.pop().unwrap_or_else(|| {
        Err(StoreFailure::new(
            "internal error: a batch of one had no answer",
        ))
    })
}

/// `todo` split into the first request of each key (one statement) and the rest (later).
fn distinct_keys<'a>(
    todo: &[usize],
    key: impl Fn(usize) -> &'a String,
) -> (Vec<usize>, Vec<usize>) {
    let mut seen = std::collections::HashSet::new();
    todo.iter().partition(|&&i| seen.insert(key(i)))
}

fn timeout_option(name: &str, value: Option<f64>, default: f64) -> StoreResult<Duration> {
    let ms = value.unwrap_or(default);
    if !ms.is_finite() || ms <= 0.0 {
        return Err(StoreFailure::new(format!(
            "{name} must be a positive, finite number of milliseconds, got {ms}"
        )));
    }
    Ok(Duration::from_millis(
        ms.ceil().min(24.0 * 3600.0 * 1000.0) as u64
    ))
}

/// Where each key of a round is among the requests (a round's keys are distinct).
fn by_key<'a>(
    round: &[usize],
    key: impl Fn(usize) -> &'a String,
) -> std::collections::HashMap<&'a str, usize> {
    round.iter().map(|&i| (key(i).as_str(), i)).collect()
}

/// A statement PostgreSQL ended as a deadlock's victim (SQLSTATE 40P01): it was rolled
/// back whole, so sending it again is safe. The store's own statements lock rows in one
/// order (see sql/acquire.sql), but another transaction on the table (an operator's
/// UPDATE over many rows) need not.
fn deadlock_victim(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED)
}

struct Inner {
    pool: Arc<Pool>,
    listening: Mutex<Option<Listening>>,
}

impl Inner {
    /// One run of a batch statement (acquire or settle, which `pick` takes from the
    /// session's prepared ones) with `params`: its rows, or `None` when the server ended it
    /// as a deadlock's victim (rolled back whole: none of its requests is answered, and
    /// each is sent again, as a stale one is).
    async fn batch_rows(
        &self,
        what: &str,
        pick: for<'a> fn(&'a pool::Prepared) -> &'a tokio_postgres::Statement,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> StoreResult<Option<Vec<Row>>> {
        self.pool
            .run(what, |s| async move {
                match s.client.query(pick(&s.st), params).await {
                    Ok(rows) => Ok(Some(rows)),
                    Err(e) if deadlock_victim(&e) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await
    }

    /// The requests of `round` the statement left unanswered, to be sent again; one left
    /// unanswered SEND_TRIES times is answered with an error instead.
    fn again<'a, T>(
        &self,
        round: &[usize],
        out: &mut [Option<StoreResult<T>>],
        tries: &mut [usize],
        what: &str,
        key: impl Fn(usize) -> &'a String,
    ) -> Vec<usize> {
        let mut again = Vec::new();
        for &i in round {
            if out[i].is_some() {
                continue;
            }
            tries[i] += 1;
            if tries[i] >= SEND_TRIES {
                out[i] = Some(Err(self.pool.target.failure(
                    what,
                    format!(
                        "key {:?} kept changing (or its statement was a deadlock's victim) \
                         under {SEND_TRIES} tries",
                        key(i)
                    ),
                )));
            } else {
                again.push(i);
            }
        }
        again
    }

    async fn acquire(&self, req: AcquireRequest) -> StoreResult<AcquireOutcome> {
        one(self.acquire_batch(vec![req]).await)
    }

    /// Claims every request (see `sql/acquire.sql`), each with its own outcome: one
    /// statement for the batch, and again for the claims that must be sent again (a row
    /// that appeared or changed after the statement's snapshot) and for a key's later
    /// requests (one statement touches a row once).
    async fn acquire_batch(&self, reqs: Vec<AcquireRequest>) -> Vec<StoreResult<AcquireOutcome>> {
        const WHAT: &str = "PostgreSQL acquire failed";
        let mut out: Vec<Option<StoreResult<AcquireOutcome>>> =
            (0..reqs.len()).map(|_| None).collect();
        let tokens: Vec<String> = reqs.iter().map(|_| new_token()).collect();
        let mut tries = vec![0usize; reqs.len()];
        let mut todo: Vec<usize> = Vec::with_capacity(reqs.len());
        for (i, r) in reqs.iter().enumerate() {
            match check_texts(&[
                ("key", Some(&r.key)),
                ("name", Some(&r.name)),
                ("fingerprint", Some(&r.fingerprint)),
                ("meta", r.meta.as_deref()),
            ]) {
                Ok(()) => todo.push(i),
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        while !todo.is_empty() {
            let (round, later) = distinct_keys(&todo, |i| &reqs[i].key);
            let keys: Vec<&str> = round.iter().map(|&i| reqs[i].key.as_str()).collect();
            let names: Vec<&str> = round.iter().map(|&i| reqs[i].name.as_str()).collect();
            let fingerprints: Vec<&str> = round
                .iter()
                .map(|&i| reqs[i].fingerprint.as_str())
                .collect();
            let round_tokens: Vec<&str> = round.iter().map(|&i| tokens[i].as_str()).collect();
            let leases: Vec<i64> = round.iter().map(|&i| whole_ms(reqs[i].lease_ms)).collect();
            let forces: Vec<bool> = round.iter().map(|&i| reqs[i].force).collect();
            let metas: Vec<Option<&str>> = round.iter().map(|&i| reqs[i].meta.as_deref()).collect();
            let rows = self
                .batch_rows(
                    WHAT,
                    |st| &st.acquire,
                    &[
                        &keys,
                        &names,
                        &fingerprints,
                        &round_tokens,
                        &leases,
                        &forces,
                        &metas,
                    ],
                )
                .await;
            let rows = match rows {
                Ok(rows) => rows.unwrap_or_default(),
                Err(e) => {
                    for &i in &round {
                        out[i] = Some(Err(e.clone()));
                    }
                    todo = later;
                    continue;
                }
            };
            let at = by_key(&round, |i| &reqs[i].key);
            for row in &rows {
                let Some(&i) = at.get(row.get::<_, &str>(0)) else {
                    continue;
                };
                let acquired: bool = row.get(1);
                let attempts = attempts_of(row.get::<_, Option<i32>>(2).unwrap_or(0));
                out[i] = Some(Ok(if acquired {
                    AcquireOutcome {
                        acquired,
                        token: Some(tokens[i].clone()),
                        attempts,
                        taken_over: row.get(3),
                        record: None,
                    }
                } else {
                    // The record in the way, as the snapshot showed it when it refused.
                    let mut record = record_at(row, reqs[i].key.clone(), 4);
                    record.attempts = attempts;
                    AcquireOutcome {
                        acquired,
                        token: None,
                        attempts,
                        taken_over: false,
                        record: Some(record),
                    }
                }));
            }
            // No row: neither claimed nor refused. The row appeared or changed after the
            // snapshot (the statement waited for its writer), or the statement was a
            // deadlock's victim: send the claim again.
            let mut again = self.again(&round, &mut out, &mut tries, WHAT, |i| &reqs[i].key);
            again.extend(later);
            todo = again;
        }
        out.into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    Err(StoreFailure::new(
                        "internal error: a claim of the batch was not answered",
                    ))
                })
            })
            .collect()
    }

    async fn settle(&self, status: &'static str, r: SettleRequest) -> StoreResult<bool> {
        one(self.settle_batch(status, vec![r]).await)
    }

    /// Settles every request (see `sql/settle.sql`), each with its own answer; a key's
    /// later requests go in a statement of their own (one statement touches a row once),
    /// and so do settles whose row changed after the statement's snapshot (`stale`).
    async fn settle_batch(
        &self,
        status: &'static str,
        reqs: Vec<SettleRequest>,
    ) -> Vec<StoreResult<bool>> {
        let what = if status == COMPLETED {
            "PostgreSQL complete failed"
        } else {
            "PostgreSQL fail failed"
        };
        let mut out: Vec<Option<StoreResult<bool>>> = (0..reqs.len()).map(|_| None).collect();
        let mut tries = vec![0usize; reqs.len()];
        let mut todo = Vec::with_capacity(reqs.len());
        for (i, r) in reqs.iter().enumerate() {
            match check_texts(&[
                ("key", Some(&r.key)),
                ("token", Some(&r.token)),
                ("result", r.result.as_deref()),
                ("error", r.error.as_deref()),
            ]) {
                Ok(()) => todo.push(i),
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        while !todo.is_empty() {
            let (round, later) = distinct_keys(&todo, |i| &reqs[i].key);
            let keys: Vec<&str> = round.iter().map(|&i| reqs[i].key.as_str()).collect();
            let tokens: Vec<&str> = round.iter().map(|&i| reqs[i].token.as_str()).collect();
            let statuses: Vec<&str> = round.iter().map(|_| status).collect();
            let results: Vec<Option<&str>> =
                round.iter().map(|&i| reqs[i].result.as_deref()).collect();
            let errors: Vec<Option<&str>> =
                round.iter().map(|&i| reqs[i].error.as_deref()).collect();
            let ttls: Vec<Option<i64>> = round
                .iter()
                .map(|&i| reqs[i].ttl_ms.map(whole_ms))
                .collect();
            let durations: Vec<Option<f64>> = round
                .iter()
                .map(|&i| reqs[i].duration_ms.filter(|d| d.is_finite()))
                .collect();
            let rows = self
                .batch_rows(
                    what,
                    |st| &st.settle,
                    &[
                        &keys, &tokens, &statuses, &results, &errors, &ttls, &durations,
                    ],
                )
                .await;
            let mut again = match rows {
                Ok(rows) => {
                    let at = by_key(&round, |i| &reqs[i].key);
                    for row in rows.iter().flatten() {
                        if let Some(&i) = at.get(row.get::<_, &str>(0)) {
                            out[i] = Some(Ok(row.get(1)));
                        }
                    }
                    // No row: the snapshot showed the claim pending under its token, yet
                    // the UPDATE did not settle it: the row changed after the snapshot
                    // (the statement waited for its writer), and whether this settle took
                    // is not known yet; or the statement was a deadlock's victim (rolled
                    // back). Send it again.
                    self.again(&round, &mut out, &mut tries, what, |i| &reqs[i].key)
                }
                Err(e) => {
                    for &i in &round {
                        out[i] = Some(Err(e.clone()));
                    }
                    Vec::new()
                }
            };
            again.extend(later);
            todo = again;
        }
        out.into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    Err(StoreFailure::new(
                        "internal error: a settle of the batch was not answered",
                    ))
                })
            })
            .collect()
    }

    async fn renew(&self, key: String, token: String, lease_ms: f64) -> StoreResult<bool> {
        check_texts(&[("key", Some(&key)), ("token", Some(&token))])?;
        let lease = whole_ms(lease_ms);
        let row = self
            .pool
            .run("PostgreSQL renew failed", |s| {
                let (key, token) = (&key, &token);
                async move { s.client.query_one(&s.st.renew, &[key, token, &lease]).await }
            })
            .await?;
        Ok(row.get(0))
    }

    async fn release(&self, key: String, reconcile: bool) -> StoreResult<bool> {
        check_text("key", &key)?;
        let row = self
            .pool
            .run("PostgreSQL release failed", |s| {
                let key = &key;
                async move { s.client.query_one(&s.st.release, &[key, &reconcile]).await }
            })
            .await?;
        Ok(row.get(0))
    }

    async fn get(&self, key: String) -> StoreResult<Option<NativeRecord>> {
        check_text("key", &key)?;
        let rows = self
            .pool
            .run("PostgreSQL read failed", |s| {
                let keys = [key.as_str()];
                async move { s.client.query(&s.st.get, &[&&keys[..]]).await }
            })
            .await?;
        Ok(rows.first().map(record_row))
    }

    async fn list(
        &self,
        status: Option<String>,
        limit: Option<u32>,
    ) -> StoreResult<Vec<NativeRecord>> {
        let limit = limit.map(i64::from);
        let rows = self
            .pool
            .run("PostgreSQL list failed", |s| {
                let status = &status;
                async move { s.client.query(&s.st.list, &[status, &limit]).await }
            })
            .await?;
        Ok(rows.iter().map(record_row).collect())
    }

    /// `listRecent`: the newest matching records, at most `limit`, filtered, sorted and
    /// cut by the server (see `recent.sql`), and how many matched; the client reads only
    /// the rows it returns. Before, the listing read every row with its result.
    async fn recent(&self, query: RecentQuery) -> StoreResult<RecentRecords> {
        const WHAT: &str = "PostgreSQL list failed";
        for (what, text) in [("status", &query.status), ("name", &query.name)] {
            if let Some(text) = text {
                check_text(what, text)?;
            }
        }
        let since = query.updated_since.map(|t| t.floor() as i64);
        let with_results = query.with_results == Some(true);
        let limit = query.limit.map(i64::from);
        let rows = self
            .pool
            .run(WHAT, |s| {
                let page = self.pool.sql.recent.clone();
                let (status, name) = (&query.status, &query.name);
                async move {
                    s.client
                        .query(
                            page.as_str(),
                            &[status, name, &since, &with_results, &limit],
                        )
                        .await
                }
            })
            .await?;
        // Each row ends with the count; nothing matched: one row, its key NULL.
        let matched = rows.first().map_or(0, |r| r.get::<_, i64>(13));
        Ok(RecentRecords {
            records: rows
                .iter()
                .filter(|r| r.get::<_, Option<String>>(0).is_some())
                .map(record_row)
                .collect(),
            matched: u32::try_from(matched).unwrap_or(u32::MAX),
        })
    }

    async fn stats(&self) -> StoreResult<NativeStats> {
        let row = self
            .pool
            .run("PostgreSQL stats failed", |s| {
                let sql = self.pool.sql.stats.clone();
                async move { s.client.query_one(sql.as_str(), &[]).await }
            })
            .await?;
        let count = |i: usize| u32::try_from(row.get::<_, i64>(i)).unwrap_or(u32::MAX);
        Ok(NativeStats {
            pending: count(0),
            completed: count(1),
            failed: count(2),
            expired: count(3),
            oldest_pending_at: row.get::<_, Option<i64>>(4).map(|t| t as f64),
            size_bytes: Some(row.get::<_, i64>(5) as f64),
        })
    }

    async fn clear(&self, key: Option<String>) -> StoreResult<u32> {
        if let Some(k) = &key {
            check_text("key", k)?;
        }
        let n = self
            .pool
            .run("PostgreSQL clear failed", |s| {
                let key = &key;
                async move { s.client.execute(&s.st.clear, &[key]).await }
            })
            .await?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// Gives the settled rows among `keys` the expiry `expires_at` (see `expire.sql`).
    async fn expire_settled(&self, keys: Vec<String>, expires_at: f64) -> StoreResult<u32> {
        for key in &keys {
            check_text("key", key)?;
        }
        let at = expires_at.floor() as i64;
        let n = self
            .pool
            .run("PostgreSQL expire failed", |s| {
                let sql = self.pool.sql.expire.clone();
                let keys = &keys;
                async move { s.client.execute(sql.as_str(), &[keys, &at]).await }
            })
            .await?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// One batch of `prune.sql` from `from` (epoch ms): how many rows the server says it
    /// deleted (its command tag), and the greatest expiry among the rows it returned,
    /// where the next batch starts.
    async fn prune_from(&self, from: i64) -> StoreResult<(u64, Option<i64>)> {
        const WHAT: &str = "PostgreSQL prune failed";
        let (n, reached) = self
            .pool
            .run(WHAT, |s| async move {
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&PRUNE_BATCH, &from];
                let rows = s.client.query_raw(&s.st.prune, params).await?;
                futures_util::pin_mut!(rows);
                let mut reached: Option<i64> = None;
                while let Some(row) = rows.try_next().await? {
                    let at: Option<i64> = row.get(0);
                    reached = reached.max(at);
                }
                Ok((rows.rows_affected().unwrap_or(0), reached))
            })
            .await?;
        if n > PRUNE_BATCH as u64 {
            return Err(self.pool.target.failure(WHAT, over_batch(n)));
        }
        Ok((n, reached))
    }

    /// Deletes every expired row, a batch at a time, while batches come back full, each
    /// batch going on in expiry order from where the last one ended (see `prune.sql`), so
    /// every batch costs the same. A server (or a proxy in front of it) that always
    /// reports a full batch would keep this going forever: it stops after
    /// `MAX_PRUNE_BATCHES` full batches, and at once on a batch said to be larger than
    /// asked for.
    async fn prune(&self) -> StoreResult<u32> {
        const WHAT: &str = "PostgreSQL prune failed";
        let mut total: u64 = 0;
        let mut from = i64::MIN;
        for _ in 0..MAX_PRUNE_BATCHES {
            let (n, reached) = self.prune_from(from).await?;
            total += n;
            if n < PRUNE_BATCH as u64 {
                return Ok(u32::try_from(total).unwrap_or(u32::MAX));
            }
            // `>=` in the statement: rows of the same expiry past the batch's end are next.
            from = reached.unwrap_or(from).max(from);
        }
        Err(self.pool.target.failure(
            WHAT,
            format!(
                "prune stopped after {MAX_PRUNE_BATCHES} full batches ({total} rows) with the \
                 server still reporting full ones: more expired rows than one prune deletes \
                 (run it again to go on), or{BROKEN_SERVER}"
            ),
        ))
    }

    /// One batch of `prune` (at most PRUNE_BATCH rows): the store's periodic pass. It
    /// starts from the first expired row each time: a pass is one batch, and rows can
    /// expire in any order between passes.
    async fn prune_batch(&self) -> StoreResult<u32> {
        let (n, _) = self.prune_from(i64::MIN).await?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// Marks a pending claim as awaited (see `watch.sql`): the claim's tag, which its
    /// settle's NOTIFY will carry; `None` when it is not pending.
    async fn watch(&self, key: String) -> StoreResult<Option<String>> {
        check_text("key", &key)?;
        let row = self
            .pool
            .run("PostgreSQL watch failed", |s| {
                let key = &key;
                async move { s.client.query_opt(&s.st.watch, &[key]).await }
            })
            .await?;
        Ok(row.map(|r| r.get::<_, String>(0)))
    }

    /// Creates the table if it is missing (for roles that may not create it on first use,
    /// run once by one that may); checks its version if it is there.
    async fn migrate(&self) -> StoreResult<bool> {
        const WHAT: &str = "PostgreSQL migrate failed";
        let pool = self.pool.clone();
        let work = async move {
            let client = pool.connect(WHAT).await?;
            let row = client
                .query_one(pool.sql.version_query.as_str(), &[&pool.table.quoted])
                .await
                .map_err(|e| pool.fail(WHAT, &e))?;
            let present: bool = row.get(0);
            if present {
                pool.ensure_schema(&client, WHAT, false).await?;
                return Ok(false);
            }
            pool.create_table(&client, WHAT).await?;
            Ok(true)
        };
        match tokio::time::timeout(self.pool.deadline() * 2, work).await {
            Ok(outcome) => outcome,
            Err(_) => Err(self.pool.target.failure(WHAT, "no answer in time")),
        }
    }
}

#[napi]
pub struct NativePostgresStore {
    inner: Arc<Inner>,
}

impl NativePostgresStore {
    /// Builds a store from options without any I/O (shared by the constructor and tests).
    pub fn from_options(options: PostgresOptions) -> StoreResult<Self> {
        let target = Target::parse(&options.url)?;
        let bad = |e: StoreFailure| target.failure("invalid PostgresStore options", e);
        let table = Table::parse(options.table.as_deref().unwrap_or(DEFAULT_TABLE)).map_err(bad)?;
        let connect = timeout_option(
            "connectTimeoutMs",
            options.connect_timeout_ms,
            DEFAULT_CONNECT_TIMEOUT_MS,
        )
        .map_err(bad)?;
        let command = timeout_option(
            "commandTimeoutMs",
            options.command_timeout_ms,
            DEFAULT_COMMAND_TIMEOUT_MS,
        )
        .map_err(bad)?;
        let size = options.pool_size.unwrap_or(DEFAULT_POOL_SIZE);
        if !(1..=64).contains(&size) {
            return Err(bad(StoreFailure::new(format!(
                "poolSize must be 1 to 64, got {size}"
            ))));
        }
        let pool = Pool::new(
            target,
            table,
            size as usize,
            connect,
            command,
            options.create_table.unwrap_or(true),
        )?;
        Ok(NativePostgresStore {
            inner: Arc::new(Inner {
                pool: Arc::new(pool),
                listening: Mutex::new(None),
            }),
        })
    }
}

#[napi]
impl NativePostgresStore {
    /// Parses and checks the options; connects on first use, not here.
    #[napi(constructor, catch_unwind)]
    pub fn new(options: PostgresOptions) -> Result<Self> {
        Ok(Self::from_options(options)?)
    }

    /// The server's URL, with any password replaced by `***`.
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.inner.pool.target.label.clone()
    }

    /// The table, as given.
    #[napi(getter)]
    pub fn table(&self) -> String {
        self.inner.pool.table.name.clone()
    }

    #[napi]
    pub async fn acquire(&self, request: AcquireRequest) -> Result<AcquireOutcome> {
        self.with(|s| async move { s.acquire(request).await }).await
    }

    /// Every acquire issued in one turn of the event loop, in one crossing and one
    /// statement (one commit, where each would be its own).
    #[napi]
    pub async fn acquire_batch(&self, requests: Vec<AcquireRequest>) -> Result<Vec<AcquireReply>> {
        self.with(|s| async move {
            Ok(s.acquire_batch(requests)
                .await
                .into_iter()
                .map(AcquireReply::from)
                .collect())
        })
        .await
    }

    /// Every complete issued in one turn of the event loop, in one crossing and one statement.
    #[napi]
    pub async fn complete_batch(&self, requests: Vec<SettleRequest>) -> Result<Vec<SettleReply>> {
        self.with(|s| async move {
            Ok(s.settle_batch(COMPLETED, requests)
                .await
                .into_iter()
                .map(SettleReply::from)
                .collect())
        })
        .await
    }

    /// The newest records that match `query`, read in one bounded query (see `recent`).
    #[napi]
    pub async fn list_recent(&self, query: RecentQuery) -> Result<RecentRecords> {
        self.with(|s| async move { s.recent(query).await }).await
    }

    /// Deletes expired rows, in batches; returns how many.
    #[napi]
    pub async fn prune(&self) -> Result<u32> {
        self.with(|s| async move { s.prune().await }).await
    }

    /// Deletes at most one batch (1000) of expired rows; returns how many (the store's
    /// periodic pass: bounded work, the next pass takes the rest).
    #[napi]
    pub async fn prune_batch(&self) -> Result<u32> {
        self.with(|s| async move { s.prune_batch().await }).await
    }

    /// Creates the table when it is missing: true if it was created, false if it was
    /// already there (its schema version checked).
    #[napi]
    pub async fn migrate(&self) -> Result<bool> {
        self.with(|s| async move { s.migrate().await }).await
    }

    /// The tags of the awaited claims settled since the last call (in any process; see
    /// `watch`), waiting for at least one; `''` means "look again at every key". Starts
    /// listening on first call; resolves null once `stopListening` is called.
    #[napi]
    pub async fn next_settled(&self) -> Result<Option<Vec<String>>> {
        let rx = {
            let mut slot = self
                .inner
                .listening
                .lock()
                .map_err(|_| StoreFailure::new("the store is closed"))?;
            slot.get_or_insert_with(|| Listening::start(self.inner.pool.clone()))
                .receiver()
        };
        guarded(async move { Ok(listen::next(&rx).await) }).await
    }

    /// Asks for a NOTIFY when `key`'s pending claim settles (call once `nextSettled` has
    /// reported that listening began): the claim's tag, which that NOTIFY (and so
    /// `nextSettled`) will carry instead of the key. Null when the key is not pending:
    /// look again.
    #[napi]
    pub async fn watch(&self, key: String) -> Result<Option<String>> {
        self.with(|s| async move { s.watch(key).await }).await
    }

    /// Stops listening (a pending `nextSettled` resolves null).
    #[napi]
    pub fn stop_listening(&self) {
        if let Ok(mut slot) = self.inner.listening.lock() {
            if let Some(l) = slot.take() {
                l.stop();
            }
        }
    }

    /// Closes the connections. Later calls fail with "the store is closed".
    #[napi]
    pub async fn close(&self) -> Result<()> {
        self.stop_listening();
        let inner = self.inner.clone();
        guarded(async move {
            inner.pool.close().await;
            Ok(())
        })
        .await
    }
}

crate::network_store::network_store_methods!(NativePostgresStore);
