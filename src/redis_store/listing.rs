//! Walks over every record of a store: `listRecords`, `stats` and `clear()` SCAN the
//! prefix (never KEYS) on the one server or on every primary of a cluster, and read or
//! delete only the keys that are this store's own records (see `Raw::own_record`).

use std::collections::HashSet;

use redis::Value;

use super::connection::{match_pattern, Handle, NodeAddr};
use super::{legacy, record, scripts, text, Inner};
use crate::failure::StoreResult;
use crate::record::{NativeRecord, NativeStats, Record};

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

    /// What each of `keys` holds, as `raw_record` reads it: pipelined on one server; on a
    /// cluster, concurrently, each routed by its key's slot.
    async fn raw_records(&self, what: &str, keys: &[String]) -> StoreResult<Vec<Raw>> {
        self.conn
            .run(what, |c| {
                let keys = keys.to_vec();
                async move {
                    match c {
                        Handle::Single(mut m) => {
                            let mut pipe = redis::pipe();
                            for k in &keys {
                                pipe.cmd("GET").arg(k).cmd("PEXPIRETIME").arg(k);
                            }
                            pipe.ignore_errors();
                            let values = pipe.query_async::<Vec<Value>>(&mut m).await?;
                            let mut out = Vec::with_capacity(keys.len());
                            let mut hashes = redis::pipe();
                            hashes.ignore_errors();
                            for (k, pair) in keys.iter().zip(values.chunks(2)) {
                                let raw = Raw::from_string_read(pair);
                                if matches!(raw, Raw::OtherType) {
                                    hashes.cmd("HGETALL").arg(k);
                                }
                                out.push(raw);
                            }
                            if !hashes.is_empty() {
                                let mut replies =
                                    hashes.query_async::<Vec<Value>>(&mut m).await?.into_iter();
                                for raw in out.iter_mut().filter(|r| matches!(r, Raw::OtherType)) {
                                    *raw = Raw::from_hash_read(replies.next());
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

    /// Every record under the prefix (expired ones included), and the server's time.
    async fn all_records(&self, what: &str) -> StoreResult<(i64, Vec<Record>)> {
        let now = self.server_time(what).await?;
        let mut records = Vec::new();
        let prefix_len = self.prefix.len();
        let mut scan = Scan::new(&self.prefix, self.primaries(what).await?);
        while let Some(keys) = self.scan_step(what, &mut scan).await? {
            let raws = self.raw_records(what, &keys).await?;
            for (k, raw) in keys.iter().zip(raws) {
                let Some(key) = k.get(prefix_len..) else {
                    continue;
                };
                // Another application's key, or a record of another store, is not ours.
                if let Some(r) = raw.own_record(key) {
                    records.push(r);
                }
            }
        }
        Ok((now, records))
    }

    pub(super) async fn list(
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

    pub(super) async fn stats(&self) -> StoreResult<NativeStats> {
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
