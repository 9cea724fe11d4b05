//! Walks over every record of a store: `listRecords`, `stats` and `clear()` SCAN the
//! prefix (never KEYS) on the one server or on every primary of a cluster, and read or
//! delete only the keys that are this store's own records (see `Raw::own_record`). Every
//! walk ends, and holds a bounded amount, whatever the server answers (see `walk.rs`).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use redis::{ErrorKind, Value};

use super::connection::{match_pattern, Handle, NodeAddr};
use super::walk::{Held, NodeWalk, Verdict};
use super::{legacy, record, scripts, text, Inner};
use crate::failure::StoreResult;
use crate::record::{NativeRecord, NativeStats, RecentQuery, RecentRecords, Record};

/// Keys asked for per SCAN step (a hint to the server, not a limit).
const SCAN_COUNT: usize = 500;

/// What a key under the prefix holds, as a walk reads it.
pub(super) enum Raw {
    /// A string: its value and its key's PEXPIRETIME.
    String(Vec<u8>, i64),
    /// A hash (a record of format 1, or another application's).
    Hash(Value),
    /// Gone meanwhile, or of a type no record has.
    Absent,
    /// Not a string (GET answered WRONGTYPE): the hash read decides.
    OtherType,
}

impl Raw {
    /// From the replies to `GET key` and `PEXPIRETIME key`.
    fn from_string_read(pair: &[Value]) -> Raw {
        match pair {
            [Value::BulkString(v), expiry] => {
                let at = match expiry {
                    Value::Int(n) => *n,
                    _ => -1,
                };
                Raw::String(v.clone(), at)
            }
            [Value::ServerError(e), _] if e.code() == "WRONGTYPE" => Raw::OtherType,
            _ => Raw::Absent,
        }
    }

    /// From the reply to `HGETALL key` (an error: a type that is not a hash).
    fn from_hash_read(reply: Option<Value>) -> Raw {
        match reply {
            Some(v @ (Value::Array(_) | Value::Map(_))) => Raw::Hash(v),
            _ => Raw::Absent,
        }
    }

    /// The record, when this is one of this store's own under `key`: a format-2 value
    /// whose key field is `key`, or a format-1 hash whose `key` field is.
    pub(super) fn own_record(self, key: &str) -> Option<Record> {
        match self {
            Raw::String(v, at) => {
                let d = record::decode(&v, at).ok()?;
                (d.record.key == key).then_some(d.record)
            }
            Raw::Hash(v) => {
                let f = legacy::fields(&v).filter(|f| !f.is_empty())?;
                if !legacy::own_record(key, &f) {
                    return None;
                }
                legacy::to_record(key, f).ok()
            }
            Raw::Absent | Raw::OtherType => None,
        }
    }

    /// The bytes of the value as read (what holding its record costs, roughly).
    fn size(&self) -> usize {
        match self {
            Raw::String(v, _) => v.len(),
            Raw::Hash(Value::Array(items)) => items.iter().map(value_size).sum(),
            Raw::Hash(Value::Map(pairs)) => pairs
                .iter()
                .map(|(k, v)| value_size(k) + value_size(v))
                .sum(),
            Raw::Hash(_) | Raw::Absent | Raw::OtherType => 0,
        }
    }
}

fn value_size(v: &Value) -> usize {
    match v {
        Value::BulkString(b) => b.len(),
        _ => 8,
    }
}

/// One key read on a cluster connection (GET and PEXPIRETIME, one slot; HGETALL for a
/// record of format 1).
async fn raw_record(c: &mut Handle, key: &str) -> redis::RedisResult<Raw> {
    let mut pipe = redis::pipe();
    pipe.cmd("GET").arg(key).cmd("PEXPIRETIME").arg(key);
    pipe.ignore_errors();
    let pair = pipe.query_async::<Vec<Value>>(c).await?;
    match Raw::from_string_read(&pair) {
        Raw::OtherType => {
            let mut pipe = redis::pipe();
            pipe.cmd("HGETALL").arg(key);
            pipe.ignore_errors();
            let reply = pipe.query_async::<Vec<Value>>(c).await?;
            Ok(Raw::from_hash_read(reply.into_iter().next()))
        }
        raw => Ok(raw),
    }
}

/// A SCAN walk over the prefix, on every node that holds keys (one, or each primary).
struct Scan {
    pattern: String,
    nodes: Vec<Option<NodeAddr>>,
    node: usize,
    cursor: u64,
    /// The walk of the current node (its cursors, its steps: see `walk.rs`).
    walk: NodeWalk,
}

impl Scan {
    fn new(prefix: &str, nodes: Vec<Option<NodeAddr>>) -> Self {
        Scan {
            pattern: match_pattern(prefix),
            nodes,
            node: 0,
            cursor: 0,
            walk: NodeWalk::default(),
        }
    }
}

impl Inner {
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
        let nodes = text(&reply).ok_or_else(|| self.malformed(what, format_args!("{reply:?}")))?;
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
    /// turn); `None` when done. A key may come twice (SCAN may list it twice).
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
            // A server that never answers cursor 0 would keep the walk going forever.
            let on = |why: String| match &node {
                Some((host, port)) => format!("on node {host}:{port}, {why}"),
                None => why,
            };
            match scan.walk.step(next) {
                Verdict::Go => {}
                Verdict::Stop(why) => return Err(self.conn.target.failure(what, on(why))),
                Verdict::AskSize => {
                    let size = self.node_size(what, &node).await?;
                    scan.walk
                        .sized(size)
                        .map_err(|why| self.conn.target.failure(what, on(why)))?;
                }
            }
            scan.cursor = next;
            if next == 0 {
                scan.node += 1;
                scan.walk = NodeWalk::default();
            }
            // Keys that are not UTF-8 were not written here.
            let batch: Vec<String> = keys
                .into_iter()
                .filter_map(|k| String::from_utf8(k).ok())
                .collect();
            if !batch.is_empty() {
                return Ok(Some(batch));
            }
        }
        Ok(None)
    }

    /// How many keys a node says it holds (DBSIZE); `None` when it does not say (an error
    /// reply, such as a proxy that does not pass DBSIZE on, or a reply that is no count).
    async fn node_size(&self, what: &str, node: &Option<NodeAddr>) -> StoreResult<Option<u64>> {
        let reply = self
            .conn
            .run(what, |mut c| {
                let node = node.clone();
                async move {
                    match c.on_node(node.as_ref(), redis::cmd("DBSIZE")).await {
                        Ok(v) => Ok(Some(v)),
                        Err(e) if matches!(e.kind(), ErrorKind::Server(_)) => Ok(None),
                        Err(e) => Err(e),
                    }
                }
            })
            .await?;
        Ok(match reply {
            Some(Value::Int(n)) => u64::try_from(n).ok(),
            _ => None,
        })
    }

    /// What each of `keys` holds, as `raw_record` reads it: pipelined on one server; on a
    /// cluster, concurrently, each routed by its key's slot.
    async fn raw_records(&self, what: &str, keys: &[String]) -> StoreResult<Vec<Raw>> {
        self.conn
            .run(what, |c| {
                let keys = keys.to_vec();
                async move {
                    match c {
                        Handle::Single(mut m) => {
                            // One MGET for the batch (a command per key cost the server
                            // twice as much: bench/scenarios/operations.js); then, in one
                            // pipeline, PEXPIRETIME where the value's times come from it
                            // (a SET NX claim) and HGETALL where MGET had no string (a
                            // record of format 1, another type, or a key gone meanwhile).
                            let values = match redis::cmd("MGET")
                                .arg(&keys)
                                .query_async::<Vec<Value>>(&mut m)
                                .await
                            {
                                Ok(values) => values,
                                // An ACL user made from the list docs/stores.md gave before
                                // the walk used MGET: a GET per key, as then.
                                Err(e) if e.code() == Some("NOPERM") => {
                                    let mut gets = redis::pipe();
                                    for k in &keys {
                                        gets.cmd("GET").arg(k);
                                    }
                                    gets.ignore_errors();
                                    gets.query_async::<Vec<Value>>(&mut m).await?
                                }
                                Err(e) => return Err(e),
                            };
                            let mut out: Vec<Raw> = Vec::with_capacity(keys.len());
                            let mut follow = redis::pipe();
                            follow.ignore_errors();
                            for (k, v) in keys.iter().zip(values) {
                                out.push(match v {
                                    Value::BulkString(b) => {
                                        if record::times_from_expiry(&b) {
                                            follow.cmd("PEXPIRETIME").arg(k);
                                        }
                                        Raw::String(b, -1)
                                    }
                                    // Absent, or not a string (MGET: nil; GET: WRONGTYPE).
                                    Value::Nil | Value::ServerError(_) => {
                                        follow.cmd("HGETALL").arg(k);
                                        Raw::OtherType
                                    }
                                    _ => Raw::Absent,
                                });
                            }
                            if !follow.is_empty() {
                                let mut replies =
                                    follow.query_async::<Vec<Value>>(&mut m).await?.into_iter();
                                for raw in out.iter_mut() {
                                    match raw {
                                        Raw::String(b, at) if record::times_from_expiry(b) => {
                                            if let Some(Value::Int(n)) = replies.next() {
                                                *at = n;
                                            }
                                        }
                                        Raw::OtherType => {
                                            *raw = Raw::from_hash_read(replies.next());
                                        }
                                        _ => {}
                                    }
                                }
                            }
                            Ok(out)
                        }
                        cluster => {
                            let mut tasks = tokio::task::JoinSet::new();
                            for (i, k) in keys.into_iter().enumerate() {
                                let mut c = cluster.clone();
                                tasks.spawn(async move { (i, raw_record(&mut c, &k).await) });
                            }
                            let mut slots: Vec<Option<Raw>> = Vec::new();
                            while let Some(done) = tasks.join_next().await {
                                let (i, raw) = done.map_err(|e| {
                                    redis::RedisError::from(std::io::Error::other(e.to_string()))
                                })?;
                                if slots.len() <= i {
                                    slots.resize_with(i + 1, || None);
                                }
                                slots[i] = Some(raw?);
                            }
                            Ok(slots.into_iter().flatten().collect())
                        }
                    }
                }
            })
            .await
    }

    /// Every record under the prefix (expired ones included), each given to `visit` once
    /// with the server's time; returns that time. `values`: whether the caller keeps the
    /// records (a listing) or only counts them (`stats`), for what the walk counts as held.
    ///
    /// One batch at a time. Decoding a batch while the server read the next was tried: at a
    /// million records it took longer (5.4 s against 4.7 s, bench/scenarios/operations.js),
    /// the two cores being shared with the server.
    async fn all_records(
        &self,
        what: &str,
        values: bool,
        mut visit: impl FnMut(i64, Record) + Send,
    ) -> StoreResult<i64> {
        let now = self.server_time(what).await?;
        let prefix_len = self.prefix.len();
        let mut held = Held::default();
        let mut scan = Scan::new(&self.prefix, self.primaries(what).await?);
        while let Some(keys) = self.scan_step(what, &mut scan).await? {
            let raws = self.raw_records(what, &keys).await?;
            for (k, raw) in keys.iter().zip(raws) {
                let Some(key) = k.get(prefix_len..) else {
                    continue;
                };
                let bytes = if values { raw.size() } else { 0 };
                if let Some(r) = raw.own_record(key) {
                    let new = held
                        .take(key, bytes)
                        .map_err(|why| self.conn.target.failure(what, why))?;
                    if new {
                        visit(now, r);
                    }
                }
            }
        }
        Ok(now)
    }

    pub(super) async fn list(
        &self,
        status: Option<String>,
        limit: Option<u32>,
    ) -> StoreResult<Vec<NativeRecord>> {
        let mut records = Vec::new();
        let now = self
            .all_records("Redis list failed", true, |_, r| records.push(r))
            .await?;
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

    /// `listRecent`: the newest records that match, at most `limit`, and how many matched.
    /// Redis keeps no index by time, so the walk still reads every record from the server
    /// (a record is one value, its result in it); what it holds is bounded: the `limit`
    /// newest so far (a heap whose top is the oldest kept), results dropped unless asked.
    /// Before, the listing held every record with its result, then sorted them.
    pub(super) async fn recent(&self, q: RecentQuery) -> StoreResult<RecentRecords> {
        let with_results = q.with_results == Some(true);
        let limit = q.limit.map(|l| l as usize);
        let since = q.updated_since.map(|t| t.floor() as i64);
        let mut kept = BinaryHeap::new();
        let mut matched = 0u32;
        self.all_records("Redis list failed", false, |now, mut r| {
            let wanted = !r.expired(now)
                && q.status.as_deref().is_none_or(|s| r.status == s)
                && q.name.as_deref().is_none_or(|n| r.name == n)
                && since.is_none_or(|t| r.updated_at >= t);
            if !wanted {
                return;
            }
            matched = matched.saturating_add(1);
            if !with_results {
                r.result = None;
            }
            kept.push(OldestFirst(r));
            if limit.is_some_and(|l| kept.len() > l) {
                kept.pop();
            }
        })
        .await?;
        // Ascending in OldestFirst's order is newest first.
        let records = kept
            .into_sorted_vec()
            .into_iter()
            .map(|OldestFirst(r)| r.into());
        Ok(RecentRecords {
            records: records.collect(),
            matched,
        })
    }

    pub(super) async fn stats(&self) -> StoreResult<NativeStats> {
        // Counted as they come: a count holds no record.
        let mut stats = NativeStats::default();
        self.all_records("Redis stats failed", false, |now, r| stats.count(&r, now))
            .await?;
        // The server's memory is shared with other data: no size is reported.
        stats.size_bytes = None;
        Ok(stats)
    }

    /// Deletes one record, or every record of this store (see `own_record`), each through
    /// the `clear` script, which checks that the key is still this store's record.
    pub(super) async fn clear(&self, key: Option<String>) -> StoreResult<u32> {
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

/// A record ordered so that the greatest is the one `listRecent` shows last: the oldest
/// change, and of equal ones the greatest key (the listing: newest first, ties by key).
struct OldestFirst(Record);

impl Ord for OldestFirst {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .0
            .updated_at
            .cmp(&self.0.updated_at)
            .then_with(|| self.0.key.cmp(&other.0.key))
    }
}

impl PartialOrd for OldestFirst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for OldestFirst {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for OldestFirst {}
