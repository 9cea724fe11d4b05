//! `RedisStore`'s native half: the same method surface as `NativeSqliteStore`, so one
//! TypeScript wrapper drives both (there is no `peekReplay`: Redis cannot be read
//! without a round trip, and a replay is one round trip anyway).
//!
//! - One record per key: a string at `prefix + key` (format 2, see `record.rs`). Records
//!   of format 1 (a hash, written by earlier versions) are read as they are and migrated
//!   by the scripts when met (`legacy.rs`).
//! - A new call claims with one plain `SET key <claim> NX GET PX <CLAIM_PX>`: it creates
//!   the claim, or hands back the record in the way, which is also what a replay needs.
//!   The lease is timed by the server's clock without a stored time: the claim was made
//!   at `PEXPIRETIME - CLAIM_PX`. Only a record that is pending or failed (a call in
//!   flight, a takeover, `'retry'`, a call after a failure) or of format 1 goes on to the
//!   claim script, which applies the claim rule of `claim.rs`.
//! - `complete`/`fail` (the settle script), `renew` and `release` are each one Lua script
//!   on that one key (see `lua/`): a compare-and-set on the claim's fencing token. On the
//!   loop transport, where the server has `SET ... IFEQ`, a new call's settle is that one
//!   plain command on the whole claim value instead (`on_loop/one_command.rs`).
//! - Expiry: a settled record expires at its `expires_at` (`ttlMs` from its settle), or
//!   never; a pending record never does while it is unresolved (a SET NX claim's expiry is
//!   31,700 years away, and every other pending write has none): a dead owner's claim is
//!   always taken over (and `reconcile` asked), never lost.
//! - `listRecords`, `clear()` and `stats` walk the prefix with SCAN (never KEYS); `clear`
//!   deletes with UNLINK (see `listing.rs`). Every walk ends, and holds a bounded amount,
//!   whatever the server answers (see `walk.rs`).

mod batch;
mod connection;
mod eviction;
mod legacy;
mod listing;
#[cfg(test)]
mod migration_tests;
#[cfg(unix)]
mod on_loop;
#[cfg(not(unix))]
#[path = "on_loop/unsupported.rs"]
mod on_loop;
mod ops;
mod record;
mod scripts;
#[cfg(test)]
mod tests;
mod walk;

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use redis::{Cmd, Value};

use crate::claim::{whole_ms, AcquireOutcome, AcquireRequest};
use crate::failure::{guarded, StoreFailure, StoreResult};
use crate::record::SettleRequest;
use crate::record::{NativeRecord, Record, COMPLETED, PENDING};
use crate::token::new_token;
use connection::{timeout_option, Conn, Handle, Target};
pub use connection::{DEFAULT_COMMAND_TIMEOUT_MS, DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_PREFIX};

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
    /// INTERNAL (set by lib/redis-store.ts): the JavaScript runtime is Node.js, whose
    /// event loop the store may drive its connection on (see `on_loop`).
    pub on_loop: Option<bool>,
}

struct Inner {
    conn: Conn,
    prefix: String,
}

#[napi]
pub struct NativeRedisStore {
    inner: Arc<Inner>,
    /// The transport on the JavaScript thread's event loop, when the store may use it;
    /// opened on the first call that does.
    on_loop: LoopSlot,
}

/// The loop transport's place in the store: only ever touched on the JavaScript thread
/// that made the store (checked), so it needs no lock.
struct LoopSlot {
    thread: std::thread::ThreadId,
    wanted: bool,
    transport: std::cell::RefCell<Option<std::rc::Rc<on_loop::OnLoop>>>,
}

// SAFETY: `transport` is only read or written on `thread` (see `LoopSlot::get`); the
// other fields are plain data.
unsafe impl Send for LoopSlot {}
// SAFETY: as above.
unsafe impl Sync for LoopSlot {}

impl LoopSlot {
    /// The loop transport, opened on first use; `None` when the store does not use one
    /// (or when called off the JavaScript thread, which napi never does).
    fn get(&self, env: &Env, inner: &Arc<Inner>) -> Result<Option<std::rc::Rc<on_loop::OnLoop>>> {
        if !self.wanted || std::thread::current().id() != self.thread {
            return Ok(None);
        }
        let mut slot = self.transport.borrow_mut();
        if slot.is_none() {
            *slot = Some(std::rc::Rc::new(on_loop::OnLoop::new(env, inner.clone())?));
        }
        Ok(slot.clone())
    }

    fn close(&self) {
        // A test build never opens one (napi's functions link only into the addon, and
        // napi-derive registers no method in a test build), so it has none to close.
        #[cfg(not(test))]
        if std::thread::current().id() == self.thread {
            if let Some(t) = self.transport.borrow().as_ref() {
                t.close();
            }
        }
    }
}

impl Drop for NativeRedisStore {
    fn drop(&mut self) {
        self.on_loop.close();
    }
}

/// The most of a reply a message shows.
const SHOWN: usize = 300;

/// `detail` as text, at most `SHOWN` bytes of it (formatting stops there).
fn cut(detail: impl std::fmt::Display) -> String {
    struct Limited(String, bool);
    impl std::fmt::Write for Limited {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let room = SHOWN - self.0.len();
            if s.len() <= room {
                self.0.push_str(s);
                return Ok(());
            }
            let mut end = room;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.0.push_str(&s[..end]);
            self.1 = true;
            Err(std::fmt::Error)
        }
    }
    let mut out = Limited(String::new(), false);
    let _ = std::fmt::write(&mut out, format_args!("{detail}"));
    if out.1 {
        out.0.push_str("... (cut)");
    }
    out.0
}

pub(super) fn ms_arg(ms: f64) -> i64 {
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

/// The server's clock from a TIME reply, in ms.
fn server_ms(v: &Value) -> Option<i64> {
    match v {
        Value::Array(items) if items.len() == 2 => {
            Some(int(&items[0])? * 1000 + int(&items[1])? / 1000)
        }
        _ => None,
    }
}

/// An error reply that means the key holds another type (a record of format 1 is a hash).
fn wrong_type(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if e.code() == "WRONGTYPE")
}

/// The claim script's arguments (see lua/claim.lua), for a claim under `token`.
fn claim_args(req: &AcquireRequest, token: &str) -> Vec<Vec<u8>> {
    vec![
        token.as_bytes().to_vec(),
        ms_arg(req.lease_ms).to_string().into_bytes(),
        if req.force {
            b"1".to_vec()
        } else {
            b"0".to_vec()
        },
        req.fingerprint.as_bytes().to_vec(),
        claim_fields(req),
    ]
}

fn claim_fields(req: &AcquireRequest) -> Vec<u8> {
    record::claim_fields(&req.key, &req.name, &req.fingerprint, req.meta.as_deref())
}

/// The settle script's arguments (see lua/settle.lua).
fn settle_args(status: &str, r: &SettleRequest) -> Vec<Vec<u8>> {
    vec![
        r.token.as_bytes().to_vec(),
        if status == COMPLETED {
            b"c".to_vec()
        } else {
            b"f".to_vec()
        },
        record::outcome_fields(r.result.as_deref(), r.error.as_deref()),
        r.ttl_ms
            .map(|t| ms_arg(t).to_string().into_bytes())
            .unwrap_or_default(),
        r.duration_ms
            .map(|d| (d.max(0.0).round() as i64).to_string().into_bytes())
            .unwrap_or_default(),
    ]
}

/// The renew script's arguments (see lua/renew.lua).
fn renew_args(token: String, lease_ms: f64) -> Vec<Vec<u8>> {
    vec![
        token.into_bytes(),
        ms_arg(lease_ms).to_string().into_bytes(),
    ]
}

fn settle_what(status: &str) -> &'static str {
    if status == COMPLETED {
        "Redis complete failed"
    } else {
        "Redis fail failed"
    }
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

fn claimed(token: String, attempts: u32, taken_over: bool) -> AcquireOutcome {
    AcquireOutcome {
        acquired: true,
        token: Some(token),
        attempts,
        taken_over,
        record: None,
    }
}

impl Inner {
    fn redis_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// A reply the store cannot read. `detail` is cut to a few hundred characters (and
    /// formatted no further): a hostile or broken server's reply can be megabytes, which
    /// a message must not repeat. Pass a reply as `format_args!("{reply:?}")`.
    fn malformed(&self, what: &str, detail: impl std::fmt::Display) -> StoreFailure {
        self.conn.target.failure(
            what,
            format!("unexpected reply from the server: {}", cut(detail)),
        )
    }

    /// The failure an error reply stands for.
    fn server_failure(&self, what: &str, e: &redis::ServerError) -> StoreFailure {
        self.conn.target.failure(what, connection::explain(e))
    }

    /// A value under the prefix that is not a record (another application's string).
    fn foreign(&self, what: &str, key: &str) -> StoreFailure {
        self.conn.target.failure(
            what,
            format!(
                "the key {}{key} holds a value that idempotent-tools did not write \
                 (another application's key under the store's prefix?); use another prefix, \
                 or delete that key",
                self.prefix
            ),
        )
    }

    /// A new call's `SET NX GET`: the claim itself, or the record in the way.
    fn claim_command(&self, req: &AcquireRequest, token: &str) -> Cmd {
        self.claim_command_with(req, &Self::claim_value(req, token))
    }

    /// The value a new call's `SET NX` writes.
    fn claim_value(req: &AcquireRequest, token: &str) -> Vec<u8> {
        record::claim_value(token, ms_arg(req.lease_ms), &claim_fields(req))
    }

    /// `claim_command` with its value made already.
    fn claim_command_with(&self, req: &AcquireRequest, value: &[u8]) -> Cmd {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.redis_key(&req.key))
            .arg(value)
            .arg("NX")
            .arg("GET")
            .arg("PX")
            .arg(record::CLAIM_PX);
        cmd
    }

    /// What a new call's `SET NX GET` answered: the acquire's outcome, or `None` when the
    /// claim script must decide (the key holds a pending or failed record, or a record of
    /// format 1).
    fn claim_command_outcome(
        &self,
        what: &str,
        req: &AcquireRequest,
        token: &str,
        reply: Value,
    ) -> StoreResult<Option<AcquireOutcome>> {
        match reply {
            // The key was free: the claim is ours.
            Value::Nil => Ok(Some(claimed(token.to_string(), 1, false))),
            Value::BulkString(v) => {
                let d = record::decode(&v, -1).map_err(|_| self.foreign(what, &req.key))?;
                let mut record = d.record;
                record.key.clone_from(&req.key);
                if record.status == COMPLETED {
                    return Ok(Some(refused_by(record)));
                }
                if record.status == PENDING && d.token.as_deref() == Some(token) {
                    // This very claim, applied before its reply was lost and sent again
                    // (a takeover still answers as one).
                    return Ok(Some(claimed(
                        token.to_string(),
                        record.attempts,
                        d.taken_over,
                    )));
                }
                Ok(None)
            }
            v if wrong_type(&v) => Ok(None),
            Value::ServerError(e) => Err(self.server_failure(what, &e)),
            other => Err(self.malformed(what, format_args!("{other:?}"))),
        }
    }

    /// What the claim script's reply says: the claim (under `token`), or the record in the way.
    fn claim_script_outcome(
        &self,
        what: &str,
        req: &AcquireRequest,
        token: String,
        reply: &Value,
    ) -> StoreResult<AcquireOutcome> {
        let Value::Array(items) = reply else {
            return Err(self.malformed(what, format_args!("{reply:?}")));
        };
        match items.as_slice() {
            [flag, attempts, taken_over] if int(flag) == Some(1) => Ok(claimed(
                token,
                int(attempts)
                    .and_then(|a| u32::try_from(a).ok())
                    .unwrap_or(1),
                int(taken_over) == Some(1),
            )),
            [flag, Value::BulkString(v), expiry] if int(flag) == Some(0) => {
                let d = record::decode(v, int(expiry).unwrap_or(-1))
                    .map_err(|e| self.malformed(what, e))?;
                let mut record = d.record;
                record.key.clone_from(&req.key);
                Ok(refused_by(record))
            }
            _ => Err(self.malformed(what, format_args!("{reply:?}"))),
        }
    }

    /// One command. An error reply that means "another type" comes back as its
    /// `Value::ServerError` (the caller decides what it means); any other is the failure.
    async fn command(&self, what: &str, cmd: &Cmd) -> StoreResult<Value> {
        self.conn
            .run(what, |mut c| async move {
                match cmd.query_async::<Value>(&mut c).await {
                    Err(e) if e.code() == Some("WRONGTYPE") => {
                        match e.clone().into_server_errors() {
                            Some(errors) if !errors.is_empty() => {
                                Ok(Value::ServerError(errors[0].1.clone()))
                            }
                            _ => Err(e),
                        }
                    }
                    other => other,
                }
            })
            .await
    }

    async fn script(
        &self,
        what: &str,
        script: &'static redis::Script,
        key: &str,
        args: Vec<Vec<u8>>,
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
        let token = new_token();
        let reply = self
            .command(WHAT, &self.claim_command(&req, &token))
            .await?;
        if let Some(outcome) = self.claim_command_outcome(WHAT, &req, &token, reply)? {
            return Ok(outcome);
        }
        let reply = self
            .script(WHAT, scripts::claim(), &req.key, claim_args(&req, &token))
            .await?;
        self.claim_script_outcome(WHAT, &req, token, &reply)
    }

    async fn flag_script(
        &self,
        what: &str,
        script: &'static redis::Script,
        key: &str,
        args: Vec<Vec<u8>>,
    ) -> StoreResult<bool> {
        let reply = self.script(what, script, key, args).await?;
        self.flag(what, &reply)
    }

    /// A script's 1 (done) or 0 (refused).
    fn flag(&self, what: &str, reply: &Value) -> StoreResult<bool> {
        match int(reply) {
            Some(n) => Ok(n == 1),
            None => Err(self.malformed(what, format_args!("{reply:?}"))),
        }
    }

    async fn settle(&self, status: &'static str, r: SettleRequest) -> StoreResult<bool> {
        let args = settle_args(status, &r);
        self.flag_script(settle_what(status), scripts::settle(), &r.key, args)
            .await
    }

    async fn renew(&self, key: String, token: String, lease_ms: f64) -> StoreResult<bool> {
        let args = renew_args(token, lease_ms);
        self.flag_script("Redis renew failed", scripts::renew(), &key, args)
            .await
    }

    async fn release(&self, key: String, reconcile: bool) -> StoreResult<bool> {
        let mode = if reconcile { b"1" } else { b"0" };
        self.flag_script(
            "Redis release failed",
            scripts::release(),
            &key,
            vec![mode.to_vec()],
        )
        .await
    }

    /// Gives the settled records among `keys` the expiry `expires_at`: one script per
    /// record (each on its own key, so it works on a Cluster). How many changed.
    async fn expire_settled(&self, keys: Vec<String>, expires_at: f64) -> StoreResult<u32> {
        let at = (expires_at.floor() as i64).clamp(1, MAX_MS);
        let mut changed = 0;
        for key in &keys {
            let args = vec![at.to_string().into_bytes()];
            if self
                .flag_script("Redis expire failed", scripts::expire(), key, args)
                .await?
            {
                changed += 1;
            }
        }
        Ok(changed)
    }

    async fn get(&self, key: String) -> StoreResult<Option<NativeRecord>> {
        const WHAT: &str = "Redis read failed";
        let redis_key = self.redis_key(&key);
        let replies: Vec<Value> = self
            .conn
            .run(WHAT, |mut c| {
                let mut pipe = redis::pipe();
                pipe.cmd("TIME")
                    .cmd("GET")
                    .arg(&redis_key)
                    .cmd("PEXPIRETIME")
                    .arg(&redis_key);
                pipe.ignore_errors();
                async move { pipe.query_async::<Vec<Value>>(&mut c).await }
            })
            .await?;
        let [time, value, expiry] = replies.as_slice() else {
            return Err(self.malformed(WHAT, format_args!("{replies:?}")));
        };
        let now = server_ms(time).ok_or_else(|| self.malformed(WHAT, format_args!("{time:?}")))?;
        let record = match value {
            Value::Nil => return Ok(None),
            Value::BulkString(v) => {
                let d = record::decode(v, int(expiry).unwrap_or(-1))
                    .map_err(|_| self.foreign(WHAT, &key))?;
                let mut record = d.record;
                record.key = key;
                record
            }
            v if wrong_type(v) => match self.legacy_record(WHAT, &key).await? {
                Some(record) => record,
                None => return Ok(None),
            },
            Value::ServerError(e) => return Err(self.server_failure(WHAT, e)),
            other => return Err(self.malformed(WHAT, format_args!("{other:?}"))),
        };
        Ok((!record.expired(now)).then(|| record.into()))
    }

    /// A record of format 1 (a hash), read as it is.
    async fn legacy_record(&self, what: &str, key: &str) -> StoreResult<Option<Record>> {
        let redis_key = self.redis_key(key);
        let reply: Value = self
            .conn
            .run(what, |mut c| {
                let mut cmd = redis::cmd("HGETALL");
                cmd.arg(&redis_key);
                async move { cmd.query_async::<Value>(&mut c).await }
            })
            .await?;
        let f = legacy::fields(&reply)
            .ok_or_else(|| self.malformed(what, "a record that is not a hash"))?;
        if f.is_empty() {
            return Ok(None);
        }
        legacy::to_record(key, f)
            .map(Some)
            .map_err(|e| self.conn.target.failure(what, e))
    }

    async fn server_time(&self, what: &str) -> StoreResult<i64> {
        let reply: Value = self
            .conn
            .run(what, |mut c| async move {
                redis::cmd("TIME").query_async(&mut c).await
            })
            .await?;
        server_ms(&reply).ok_or_else(|| self.malformed(what, format_args!("{reply:?}")))
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
        let cluster = options.cluster.unwrap_or(false);
        let wanted = options.on_loop == Some(true) && on_loop::available(&target, cluster);
        let conn = Conn::new(target, cluster, connect, command)?;
        Ok(NativeRedisStore {
            inner: Arc::new(Inner { conn, prefix }),
            on_loop: LoopSlot {
                thread: std::thread::current().id(),
                wanted,
                transport: std::cell::RefCell::new(None),
            },
        })
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

    /// Every acquire, complete, fail and renew issued in one turn of the event loop, in
    /// one crossing and one string (see `ops`); on a plain server under Node, on the
    /// JavaScript thread's own event loop (see `on_loop`).
    #[napi(ts_return_type = "Promise<Array<string | boolean | Array<unknown>>>")]
    pub fn run_batch<'env>(
        &self,
        env: &'env Env,
        ops: String,
    ) -> Result<PromiseRaw<'env, Vec<ops::OpReply>>> {
        let ops = ops::parse(&ops).map_err(|e| {
            Error::from_reason(format!("internal error: a malformed batch of calls ({e})"))
        })?;
        if let Some(l) = self.on_loop.get(env, &self.inner)? {
            return l.run_batch(env, ops);
        }
        let inner = self.inner.clone();
        env.spawn_future(guarded(async move { Ok(batch::run(inner, ops).await) }))
    }

    /// The newest records that match `query`, holding at most its limit (see `recent`).
    #[napi]
    pub async fn list_recent(
        &self,
        query: crate::record::RecentQuery,
    ) -> Result<crate::record::RecentRecords> {
        self.with(|s| async move { s.recent(query).await }).await
    }

    /// Redis removes expired records by itself (each settled record carries its own
    /// expiry, and a pending one never expires), so there is nothing to prune: always 0.
    #[napi]
    pub async fn prune(&self) -> Result<u32> {
        Ok(0)
    }

    /// The server's memory limit and eviction policy (see `eviction`); null when its
    /// `INFO memory` does not say. The JavaScript store warns when it evicts. Asked on the
    /// connection the calls use (on the event loop, no second connection).
    #[napi(ts_return_type = "Promise<EvictionPolicy | null>")]
    pub fn eviction_policy<'env>(
        &self,
        env: &'env Env,
    ) -> Result<PromiseRaw<'env, Option<eviction::EvictionPolicy>>> {
        if let Some(l) = self.on_loop.get(env, &self.inner)? {
            return l.eviction_policy(env);
        }
        let inner = self.inner.clone();
        env.spawn_future(guarded(async move { inner.eviction_policy().await }))
    }

    /// Drops the connections. Later calls fail with "the store is closed".
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        self.on_loop.close();
        self.inner.conn.close();
        env.spawn_future(async { Ok(()) })
    }
}

crate::network_store::network_store_methods!(NativeRedisStore);
