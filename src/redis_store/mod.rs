//! `RedisStore`'s native half: the same method surface as `NativeSqliteStore`, so one
//! TypeScript wrapper drives both (there is no `peekReplay`: Redis cannot be read
//! without a round trip, and a replay is one round trip anyway).
//!
//! - One record per key: a hash at `prefix + key`, fields `name`, `fingerprint`, `status`,
//!   `token`, `result`, `error`, `attempts`, `created_at`, `updated_at`, `expires_at`,
//!   `lease_expires_at` (times in epoch ms; `result` absent stands for `undefined`), plus
//!   `settled_token`, the token of the claim that settled the record (so a settle resent
//!   after a dropped connection is recognised; it is never shown).
//! - `acquire`, `renew`, `complete`/`fail` and `release` are each one Lua script on that one
//!   key (see `lua/`), using the server's clock. A refused acquire returns the record in
//!   the same reply, so a replay is one round trip.
//! - Expiry: a settled record expires at its `expires_at` (`ttlMs` from its settle), or
//!   never; a pending record never does, however old: a dead owner's claim is always
//!   taken over (and `reconcile` asked), never lost.
//! - `listRecords`, `clear()` and `stats` walk the prefix with SCAN (never KEYS); `clear`
//!   deletes with UNLINK.

mod batch;
mod connection;
mod scripts;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use redis::Value;

use crate::claim::{whole_ms, AcquireOutcome, AcquireRequest};
use crate::failure::{guarded, StoreFailure, StoreResult};
use crate::record::SettleRequest;
use crate::record::{NativeRecord, NativeStats, Record, COMPLETED, FAILED, PENDING};
use crate::token::new_token;
use connection::{match_pattern, timeout_option, Conn, Handle, NodeAddr, Target};
pub use connection::{DEFAULT_COMMAND_TIMEOUT_MS, DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_PREFIX};

/// What a replay reads of a completed record (everything `NativeRecord` shows, but the
/// lease, which a completed record does not have).
const REPLAY_FIELDS: [&str; 9] = [
    "status",
    "fingerprint",
    "result",
    "error",
    "attempts",
    "name",
    "created_at",
    "updated_at",
    "expires_at",
];
/// Keys asked for per SCAN step (a hint to the server, not a limit).
const SCAN_COUNT: usize = 500;
/// Lease and TTL lengths are capped (about 950 years) so that every time stays an exact
/// integer in Lua's doubles.
const MAX_MS: i64 = 30_000_000_000_000;

#[napi(object)]
pub struct RedisOptions {
    /// `redis://[[user]:password@]host[:port][/db]`, or `rediss://` for TLS.
    pub url: String,
    /// Prepended to every record key; default `idempotent-tools:`.
    pub prefix: Option<String>,
    /// Bound on opening the connection; default 2000.
    pub connect_timeout_ms: Option<f64>,
    /// Bound on each command's reply; default 5000.
    pub command_timeout_ms: Option<f64>,
    /// `url` is one node of a Redis Cluster (any node: the rest are discovered from it).
    pub cluster: Option<bool>,
}

struct Inner {
    conn: Conn,
    prefix: String,
    /// Which way `acquire` starts (see `ReplayBias`).
    bias: ReplayBias,
}

/// Whether `acquire` reads first (a plain HMGET, the replay without a script) or claims
/// first (the script, which also answers a replay, at several times the server's cost).
/// Reading first costs a new call one more round trip; claiming first costs a replay the
/// script. Both ways are correct; the store leans towards what its recent calls found: a
/// score moved up by every completed record found and down by every claim, bounded so a
/// change of workload turns it within a few calls.
struct ReplayBias(std::sync::atomic::AtomicI32);

impl ReplayBias {
    const BOUND: i32 = 8;

    fn read_first(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed) > 0
    }

    /// Learns from one acquire's outcome: up when it met a completed record (a replay),
    /// down otherwise (a claim, a call in flight).
    fn saw(&self, outcome: &AcquireOutcome) {
        use std::sync::atomic::Ordering::Relaxed;
        let replay = outcome
            .record
            .as_ref()
            .is_some_and(|r| r.status == COMPLETED);
        let step = if replay { 1 } else { -1 };
        let _ = self.0.fetch_update(Relaxed, Relaxed, |v| {
            Some((v + step).clamp(-Self::BOUND, Self::BOUND))
        });
    }
}

#[napi]
pub struct NativeRedisStore {
    inner: Arc<Inner>,
}

fn ms_arg(ms: f64) -> i64 {
    whole_ms(ms).min(MAX_MS)
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        other => text(other)?.parse().ok(),
    }
}

/// A hash as field → value, from HGETALL (RESP2 flat array or RESP3 map).
fn fields(v: &Value) -> Option<HashMap<String, String>> {
    let mut out = HashMap::new();
    match v {
        Value::Array(items) => {
            for pair in items.chunks(2) {
                if let [f, v] = pair {
                    out.insert(text(f)?, text(v)?);
                }
            }
        }
        Value::Map(pairs) => {
            for (f, v) in pairs {
                out.insert(text(f)?, text(v)?);
            }
        }
        Value::Nil => {}
        _ => return None,
    }
    Some(out)
}

/// The server's clock from a TIME reply, in ms.
fn server_ms(v: &Value) -> Option<i64> {
    match v {
        Value::Array(items) if items.len() == 2 => {
            Some(int(&items[0])? * 1000 + int(&items[1])? / 1000)
        }
        _ => None,
    }
}

fn to_record(key: &str, mut f: HashMap<String, String>) -> std::result::Result<Record, String> {
    let mut take = |name: &str| f.remove(name);
    let mut required =
        |name: &str| take(name).ok_or_else(|| format!("record '{key}' has no {name}"));
    let name = required("name")?;
    let fingerprint = required("fingerprint")?;
    let status = required("status")?;
    if ![PENDING, COMPLETED, FAILED].contains(&status.as_str()) {
        return Err(format!("record '{key}' has an unknown status '{status}'"));
    }
    let number = |name: &str, v: Option<String>| -> std::result::Result<Option<i64>, String> {
        v.map(|s| {
            s.parse::<i64>()
                .map_err(|_| format!("record '{key}' has a malformed {name}"))
        })
        .transpose()
    };
    let attempts = number("attempts", take("attempts"))?.unwrap_or(1);
    let created_at = number("created_at", take("created_at"))?.unwrap_or(0);
    Ok(Record {
        key: key.to_string(),
        name,
        fingerprint,
        status,
        token: take("token").filter(|t| !t.is_empty()),
        result: take("result"),
        error: take("error"),
        attempts: u32::try_from(attempts.max(0)).unwrap_or(u32::MAX),
        created_at,
        updated_at: number("updated_at", take("updated_at"))?.unwrap_or(created_at),
        expires_at: number("expires_at", take("expires_at"))?,
        lease_expires_at: number("lease_expires_at", take("lease_expires_at"))?,
        meta: take("meta").filter(|m| !m.is_empty()),
        duration_ms: number("duration_ms", take("duration_ms"))?,
        // Redis keeps no namespace: a store's prefix is its namespace.
        ..Record::default()
    })
}

/// The claim script's arguments (see lua/acquire.lua), for a claim under `token`.
fn claim_args(req: &AcquireRequest, token: &str) -> Vec<String> {
    vec![
        req.name.clone(),
        req.fingerprint.clone(),
        token.to_string(),
        ms_arg(req.lease_ms).to_string(),
        req.ttl_ms
            .map(|t| ms_arg(t).to_string())
            .unwrap_or_default(),
        if req.force { "1" } else { "0" }.to_string(),
        req.key.clone(),
        req.meta.clone().unwrap_or_default(),
    ]
}

/// The settle script's arguments (see lua/settle.lua).
fn settle_args(status: &str, r: &SettleRequest) -> Vec<String> {
    let present = |v: &Option<String>| if v.is_some() { "1" } else { "0" }.to_string();
    vec![
        r.token.clone(),
        status.to_string(),
        present(&r.result),
        r.result.clone().unwrap_or_default(),
        present(&r.error),
        r.error.clone().unwrap_or_default(),
        r.ttl_ms.map(|t| ms_arg(t).to_string()).unwrap_or_default(),
        r.duration_ms
            .map(|d| (d.max(0.0).round() as i64).to_string())
            .unwrap_or_default(),
    ]
}

fn settle_what(status: &str) -> &'static str {
    if status == COMPLETED {
        "Redis complete failed"
    } else {
        "Redis fail failed"
    }
}

/// The read of a replay: the fields of `REPLAY_FIELDS`, in that order.
fn replay_read(redis_key: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("HMGET");
    cmd.arg(redis_key).arg(&REPLAY_FIELDS[..]);
    cmd
}

/// An acquire refused by `record` (the replay, or the call in flight, in the way).
fn refused_by(record: Record) -> AcquireOutcome {
    AcquireOutcome {
        acquired: false,
        token: None,
        attempts: record.attempts,
        taken_over: false,
        record: Some(record.into()),
    }
}

impl Inner {
    fn redis_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn malformed(&self, what: &str, detail: impl std::fmt::Display) -> StoreFailure {
        self.conn
            .target
            .failure(what, format!("unexpected reply from the server: {detail}"))
    }

    async fn script(
        &self,
        what: &str,
        script: &'static redis::Script,
        key: &str,
        args: Vec<String>,
    ) -> StoreResult<Value> {
        let key = self.redis_key(key);
        self.conn
            .run(what, |mut c: Handle| {
                let mut invocation = script.key(&key);
                for a in &args {
                    invocation.arg(a);
                }
                async move { invocation.invoke_async::<Value>(&mut c).await }
            })
            .await
    }

    async fn acquire(&self, req: AcquireRequest) -> StoreResult<AcquireOutcome> {
        const WHAT: &str = "Redis acquire failed";
        if self.bias.read_first() {
            // The read is only a shortcut: when it fails (a cluster pipeline is not
            // redirected by ASK while its slot migrates, say), the claim script decides.
            if let Ok(Some(record)) = self.completed(WHAT, &req.key).await {
                let replay = refused_by(record);
                self.bias.saw(&replay);
                return Ok(replay);
            }
        }
        let outcome = self.claim(WHAT, &req).await?;
        self.bias.saw(&outcome);
        Ok(outcome)
    }

    /// The claim script: claims the key, or returns the record in the way.
    async fn claim(&self, what: &str, req: &AcquireRequest) -> StoreResult<AcquireOutcome> {
        let token = new_token();
        let reply = self
            .script(what, scripts::acquire(), &req.key, claim_args(req, &token))
            .await?;
        self.claim_outcome(what, req, token, &reply)
    }

    /// What the claim script's reply says: the claim (under `token`), or the record in the way.
    fn claim_outcome(
        &self,
        what: &str,
        req: &AcquireRequest,
        token: String,
        reply: &Value,
    ) -> StoreResult<AcquireOutcome> {
        let Value::Array(items) = reply else {
            return Err(self.malformed(what, format!("{reply:?}")));
        };
        match items.as_slice() {
            [flag, attempts, taken_over] if int(flag) == Some(1) => Ok(AcquireOutcome {
                acquired: true,
                token: Some(token),
                attempts: int(attempts)
                    .and_then(|a| u32::try_from(a).ok())
                    .unwrap_or(1),
                taken_over: int(taken_over) == Some(1),
                record: None,
            }),
            [flag, record] if int(flag) == Some(0) => {
                let f = fields(record)
                    .ok_or_else(|| self.malformed(what, "a record that is not a hash"))?;
                let record =
                    to_record(&req.key, f).map_err(|e| self.conn.target.failure(what, e))?;
                Ok(refused_by(record))
            }
            _ => Err(self.malformed(what, format!("{reply:?}"))),
        }
    }

    /// The key's record when it is completed, read without a script (one HMGET): a
    /// completed record never changes until it expires or is cleared, so a plain read is
    /// as good as the claim script's, at a fraction of the server's time. No clock is
    /// needed: a settled record's key expires at its `expires_at` (settle.lua sets the
    /// key's expiry to it), so Redis itself no longer shows an expired one. Anything
    /// else (absent, pending, failed) is left to the script.
    async fn completed(&self, what: &str, key: &str) -> StoreResult<Option<Record>> {
        let redis_key = self.redis_key(key);
        let reply: Value = self
            .conn
            .run(what, |mut c| {
                let cmd = replay_read(&redis_key);
                async move { cmd.query_async::<Value>(&mut c).await }
            })
            .await?;
        self.completed_from(what, key, &reply)
    }

    /// The completed record in a `replay_read` reply, if that is what it found.
    fn completed_from(&self, what: &str, key: &str, reply: &Value) -> StoreResult<Option<Record>> {
        let Value::Array(values) = reply else {
            return Err(self.malformed(what, format!("{reply:?}")));
        };
        if values.first().and_then(text).as_deref() != Some(COMPLETED) {
            return Ok(None);
        }
        let mut f = HashMap::with_capacity(REPLAY_FIELDS.len());
        for (name, v) in REPLAY_FIELDS.iter().zip(values) {
            if let Some(v) = text(v) {
                f.insert((*name).to_string(), v);
            }
        }
        let record = to_record(key, f).map_err(|e| self.conn.target.failure(what, e))?;
        Ok(Some(record))
    }

    async fn flag_script(
        &self,
        what: &str,
        script: &'static redis::Script,
        key: &str,
        args: Vec<String>,
    ) -> StoreResult<bool> {
        let reply = self.script(what, script, key, args).await?;
        self.flag(what, &reply)
    }

    /// A script's 1 (done) or 0 (refused).
    fn flag(&self, what: &str, reply: &Value) -> StoreResult<bool> {
        match int(reply) {
            Some(n) => Ok(n == 1),
            None => Err(self.malformed(what, format!("{reply:?}"))),
        }
    }

    async fn settle(&self, status: &'static str, r: SettleRequest) -> StoreResult<bool> {
        let args = settle_args(status, &r);
        self.flag_script(settle_what(status), scripts::settle(), &r.key, args)
            .await
    }

    async fn get(&self, key: String) -> StoreResult<Option<NativeRecord>> {
        const WHAT: &str = "Redis read failed";
        let redis_key = self.redis_key(&key);
        let replies: Vec<Value> = self
            .conn
            .run(WHAT, |mut c| {
                let mut pipe = redis::pipe();
                pipe.cmd("TIME").cmd("HGETALL").arg(&redis_key);
                async move { pipe.query_async::<Vec<Value>>(&mut c).await }
            })
            .await?;
        let [time, hash] = replies.as_slice() else {
            return Err(self.malformed(WHAT, format!("{replies:?}")));
        };
        let now = server_ms(time).ok_or_else(|| self.malformed(WHAT, format!("{time:?}")))?;
        let f = fields(hash).ok_or_else(|| self.malformed(WHAT, "a record that is not a hash"))?;
        if f.is_empty() {
            return Ok(None);
        }
        let record = to_record(&key, f).map_err(|e| self.conn.target.failure(WHAT, e))?;
        Ok((!record.expired(now)).then(|| record.into()))
    }

    async fn server_time(&self, what: &str) -> StoreResult<i64> {
        let reply: Value = self
            .conn
            .run(what, |mut c| async move {
                redis::cmd("TIME").query_async(&mut c).await
            })
            .await?;
        server_ms(&reply).ok_or_else(|| self.malformed(what, format!("{reply:?}")))
    }

    /// The nodes a walk over every key must visit: the one server, or every primary of
    /// the cluster (read from CLUSTER NODES: primaries that serve slots and are not failed).
    async fn primaries(&self, what: &str) -> StoreResult<Vec<Option<NodeAddr>>> {
        if !self.conn.is_cluster() {
            return Ok(vec![None]);
        }
        let reply: Value = self
            .conn
            .run(what, |mut c| async move {
                c.on_node(None, redis::cmd("CLUSTER").arg("NODES").clone())
                    .await
            })
            .await?;
        let nodes = text(&reply).ok_or_else(|| self.malformed(what, format!("{reply:?}")))?;
        let primaries: Vec<Option<NodeAddr>> = nodes
            .lines()
            .filter_map(|line| {
                let parts: Vec<&str> = line.split(' ').collect();
                let flags = parts.get(2)?;
                let serves_slots = parts.len() > 8;
                if !flags.split(',').any(|f| f == "master")
                    || flags.contains("fail")
                    || !serves_slots
                {
                    return None;
                }
                // ip:port@cport[,hostname]
                let addr = parts.get(1)?.split('@').next()?;
                let (host, port) = addr.rsplit_once(':')?;
                Some(Some((host.to_string(), port.parse().ok()?)))
            })
            .collect();
        if primaries.is_empty() {
            return Err(self.malformed(what, "CLUSTER NODES lists no primary serving slots"));
        }
        Ok(primaries)
    }

    /// The next batch of keys under the prefix (SCAN, never KEYS, on every primary in
    /// turn); `None` when done.
    async fn scan_step(&self, what: &str, scan: &mut Scan) -> StoreResult<Option<Vec<String>>> {
        while let Some(node) = scan.nodes.get(scan.node).cloned() {
            let cursor = scan.cursor;
            let reply: Value = self
                .conn
                .run(what, |mut c| {
                    let mut cmd = redis::cmd("SCAN");
                    cmd.arg(cursor)
                        .arg("MATCH")
                        .arg(&scan.pattern)
                        .arg("COUNT")
                        .arg(SCAN_COUNT);
                    let node = node.clone();
                    async move { c.on_node(node.as_ref(), cmd).await }
                })
                .await?;
            let (next, keys): (u64, Vec<Vec<u8>>) =
                redis::from_redis_value(reply).map_err(|e| self.malformed(what, e))?;
            scan.cursor = next;
            if next == 0 {
                scan.node += 1;
            }
            // SCAN may return a key twice; keys that are not UTF-8 were not written here.
            let batch: Vec<String> = keys
                .into_iter()
                .filter_map(|k| String::from_utf8(k).ok())
                .filter(|k| scan.seen.insert(k.clone()))
                .collect();
            if !batch.is_empty() {
                return Ok(Some(batch));
            }
        }
        Ok(None)
    }

    /// Whole records of `keys` (HGETALL each): pipelined on one server; on a cluster,
    /// sent concurrently, each routed by its key's slot. An error per key (another
    /// application's key of another type, say) is kept with that key.
    async fn hashes(&self, what: &str, keys: &[String]) -> StoreResult<Vec<RedisResultValue>> {
        self.conn
            .run(what, |c| {
                let keys = keys.to_vec();
                async move {
                    match c {
                        Handle::Single(mut m) => {
                            let mut pipe = redis::pipe();
                            for k in &keys {
                                pipe.cmd("HGETALL").arg(k);
                            }
                            pipe.ignore_errors();
                            pipe.query_async::<Vec<RedisResultValue>>(&mut m).await
                        }
                        cluster => {
                            let mut tasks = tokio::task::JoinSet::new();
                            for (i, k) in keys.into_iter().enumerate() {
                                let mut c = cluster.clone();
                                tasks.spawn(async move {
                                    let v = redis::cmd("HGETALL")
                                        .arg(&k)
                                        .query_async::<Value>(&mut c)
                                        .await;
                                    (i, v)
                                });
                            }
                            let mut out: Vec<RedisResultValue> = Vec::new();
                            let mut slots: Vec<Option<RedisResultValue>> = Vec::new();
                            while let Some(done) = tasks.join_next().await {
                                let (i, v) = done.map_err(|e| {
                                    redis::RedisError::from(std::io::Error::other(e.to_string()))
                                })?;
                                if slots.len() <= i {
                                    slots.resize_with(i + 1, || None);
                                }
                                slots[i] = Some(v);
                            }
                            for v in slots.into_iter().flatten() {
                                out.push(v);
                            }
                            Ok(out)
                        }
                    }
                }
            })
            .await
    }

    /// Every record under the prefix (expired ones included), and the server's time.
    async fn all_records(&self, what: &str) -> StoreResult<(i64, Vec<Record>)> {
        let now = self.server_time(what).await?;
        let mut records = Vec::new();
        let prefix_len = self.prefix.len();
        let mut scan = Scan::new(&self.prefix, self.primaries(what).await?);
        while let Some(keys) = self.scan_step(what, &mut scan).await? {
            let replies = self.hashes(what, &keys).await?;
            for (k, reply) in keys.iter().zip(replies) {
                // A key that is not a hash, or a hash that is not a record, is not ours.
                let Ok(v) = reply else { continue };
                let Some(f) = fields(&v).filter(|f| !f.is_empty()) else {
                    continue;
                };
                let Some(key) = k.get(prefix_len..) else {
                    continue;
                };
                if own_record(key, &f) {
                    if let Ok(r) = to_record(key, f) {
                        records.push(r);
                    }
                }
            }
        }
        Ok((now, records))
    }

    async fn list(
        &self,
        status: Option<String>,
        limit: Option<u32>,
    ) -> StoreResult<Vec<NativeRecord>> {
        let (now, records) = self.all_records("Redis list failed").await?;
        let mut records: Vec<Record> = records
            .into_iter()
            .filter(|r| !r.expired(now) && status.as_deref().is_none_or(|s| r.status == s))
            .collect();
        records.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.key.cmp(&b.key))
        });
        if let Some(limit) = limit {
            records.truncate(limit as usize);
        }
        Ok(records.into_iter().map(Into::into).collect())
    }

    async fn stats(&self) -> StoreResult<NativeStats> {
        let (now, records) = self.all_records("Redis stats failed").await?;
        let mut stats = NativeStats::default();
        for r in records {
            stats.count(&r, now);
        }
        // The server's memory is shared with other data: no size is reported.
        stats.size_bytes = None;
        Ok(stats)
    }

    /// Deletes one record, or every record of this store (see `own_record`), each through
    /// the `clear` script, which checks that the key is still this store's record.
    async fn clear(&self, key: Option<String>) -> StoreResult<u32> {
        const WHAT: &str = "Redis clear failed";
        if let Some(key) = key {
            let n = self.clear_own(WHAT, vec![self.redis_key(&key)]).await?;
            return Ok(u32::try_from(n).unwrap_or(u32::MAX));
        }
        let mut total: u64 = 0;
        let mut scan = Scan::new(&self.prefix, self.primaries(WHAT).await?);
        while let Some(keys) = self.scan_step(WHAT, &mut scan).await? {
            total += self.clear_own(WHAT, keys).await?;
        }
        Ok(u32::try_from(total).unwrap_or(u32::MAX))
    }

    /// Runs the `clear` script on each Redis key (pipelined on one server; concurrently,
    /// each routed by its slot, on a cluster); returns how many it deleted.
    async fn clear_own(&self, what: &str, redis_keys: Vec<String>) -> StoreResult<u64> {
        let prefix_len = self.prefix.len();
        let deleted: Vec<i64> = self
            .conn
            .run(what, |c| {
                let redis_keys = redis_keys.clone();
                async move {
                    match c {
                        Handle::Single(mut m) => {
                            let mut pipe = redis::pipe();
                            // EVALSHA in a pipeline does not load the script by itself.
                            pipe.load_script(scripts::clear()).ignore();
                            for k in &redis_keys {
                                let own_key = k.get(prefix_len..).unwrap_or_default();
                                pipe.invoke_script(scripts::clear().key(k).arg(own_key));
                            }
                            pipe.query_async::<Vec<i64>>(&mut m).await
                        }
                        cluster => {
                            let mut tasks = tokio::task::JoinSet::new();
                            for k in redis_keys {
                                let mut c = cluster.clone();
                                tasks.spawn(async move {
                                    let own_key =
                                        k.get(prefix_len..).unwrap_or_default().to_string();
                                    scripts::clear()
                                        .key(&k)
                                        .arg(own_key)
                                        .invoke_async::<i64>(&mut c)
                                        .await
                                });
                            }
                            let mut out = Vec::new();
                            while let Some(done) = tasks.join_next().await {
                                out.push(done.map_err(|e| {
                                    redis::RedisError::from(std::io::Error::other(e.to_string()))
                                })??);
                            }
                            Ok(out)
                        }
                    }
                }
            })
            .await?;
        Ok(deleted.iter().map(|n| n.max(&0).unsigned_abs()).sum())
    }
}

/// A hash under the prefix is this store's record only when its `key` field, appended to
/// the prefix, gives back its Redis key: another application's hashes have no such field,
/// and a store whose prefix extends ours (`p:sub:` under `p:`) wrote its own key there.
fn own_record(key: &str, f: &HashMap<String, String>) -> bool {
    f.get("key").is_some_and(|k| k == key)
}

type RedisResultValue = redis::RedisResult<Value>;

/// A SCAN walk over the prefix, on every node that holds keys (one, or each primary).
struct Scan {
    pattern: String,
    nodes: Vec<Option<NodeAddr>>,
    node: usize,
    cursor: u64,
    seen: HashSet<String>,
}

impl Scan {
    fn new(prefix: &str, nodes: Vec<Option<NodeAddr>>) -> Self {
        Scan {
            pattern: match_pattern(prefix),
            nodes,
            node: 0,
            cursor: 0,
            seen: HashSet::new(),
        }
    }
}

impl NativeRedisStore {
    /// Builds a store from options without any I/O (shared by the constructor and tests).
    pub fn from_options(options: RedisOptions) -> StoreResult<Self> {
        let target = Target::parse(&options.url)?;
        let bad = |e: StoreFailure| target.failure("invalid Redis store options", e);
        let prefix = options.prefix.unwrap_or_else(|| DEFAULT_PREFIX.to_string());
        if prefix.is_empty() {
            return Err(bad(StoreFailure::new(
                "prefix must not be empty (clear() would delete every key of the database)",
            )));
        }
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
        let conn = Conn::new(target, options.cluster.unwrap_or(false), connect, command)?;
        Ok(NativeRedisStore {
            inner: Arc::new(Inner {
                conn,
                prefix,
                bias: ReplayBias(std::sync::atomic::AtomicI32::new(0)),
            }),
        })
    }

    fn with<T, F, Fut>(&self, work: F) -> impl Future<Output = Result<T>>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Inner>) -> Fut,
        Fut: Future<Output = StoreResult<T>> + Send + 'static,
    {
        guarded(work(self.inner.clone()))
    }
}

#[napi]
impl NativeRedisStore {
    /// Parses and checks the options; connects on first use, not here.
    #[napi(constructor, catch_unwind)]
    pub fn new(options: RedisOptions) -> Result<Self> {
        Ok(Self::from_options(options)?)
    }

    /// The server's URL, with any password replaced by `***`.
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.inner.conn.target.label.clone()
    }

    #[napi]
    pub async fn acquire(&self, request: AcquireRequest) -> Result<AcquireOutcome> {
        self.with(|s| async move { s.acquire(request).await }).await
    }

    /// Every acquire issued in one turn of the event loop, in one crossing (see `batch`).
    #[napi]
    pub async fn acquire_batch(
        &self,
        requests: Vec<AcquireRequest>,
    ) -> Result<Vec<batch::AcquireReply>> {
        let inner = self.inner.clone();
        guarded(async move { Ok(batch::acquire(inner, requests).await) }).await
    }

    /// Every complete issued in one turn of the event loop, in one crossing.
    #[napi]
    pub async fn complete_batch(
        &self,
        requests: Vec<SettleRequest>,
    ) -> Result<Vec<batch::SettleReply>> {
        let inner = self.inner.clone();
        guarded(async move { Ok(batch::complete(inner, requests).await) }).await
    }

    #[napi]
    pub async fn renew(&self, key: String, token: String, lease_ms: f64) -> Result<bool> {
        self.with(|s| async move {
            let args = vec![token, ms_arg(lease_ms).to_string()];
            s.flag_script("Redis renew failed", scripts::renew(), &key, args)
                .await
        })
        .await
    }

    #[napi]
    pub async fn complete(&self, request: SettleRequest) -> Result<bool> {
        self.with(|s| async move { s.settle(COMPLETED, request).await })
            .await
    }

    #[napi]
    pub async fn fail(&self, request: SettleRequest) -> Result<bool> {
        self.with(|s| async move { s.settle(FAILED, request).await })
            .await
    }

    #[napi]
    pub async fn release(&self, key: String) -> Result<bool> {
        self.with(|s| async move {
            s.flag_script("Redis release failed", scripts::release(), &key, vec![])
                .await
        })
        .await
    }

    #[napi]
    pub async fn clear(&self, key: Option<String>) -> Result<u32> {
        self.with(|s| async move { s.clear(key).await }).await
    }

    /// Redis removes expired records by itself (each settled record carries its own
    /// expiry, and a pending one never expires), so there is nothing to prune: always 0.
    #[napi]
    pub async fn prune(&self) -> Result<u32> {
        Ok(0)
    }

    #[napi]
    pub async fn get(&self, key: String) -> Result<Option<NativeRecord>> {
        self.with(|s| async move { s.get(key).await }).await
    }

    #[napi]
    pub async fn list_records(
        &self,
        status: Option<String>,
        limit: Option<u32>,
    ) -> Result<Vec<NativeRecord>> {
        self.with(|s| async move { s.list(status, limit).await })
            .await
    }

    #[napi]
    pub async fn stats(&self) -> Result<NativeStats> {
        self.with(|s| async move { s.stats().await }).await
    }

    /// Drops the connection. Later calls fail with "the store is closed".
    #[napi]
    pub async fn close(&self) -> Result<()> {
        self.inner.conn.close();
        Ok(())
    }
}
