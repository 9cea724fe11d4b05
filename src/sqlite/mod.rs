//! `SqliteStore`'s native half: one file, one writer thread, two read connections.
//!
//! - Writes (`acquire`, `renew`, `complete`, `fail`, `release`, `clear`, `prune`) go to
//!   the writer thread, which commits them in groups (see `writer.rs`).
//! - Async reads (`get`, `listRecords`, `stats`) run on Tokio's blocking pool on their
//!   own connection, so they never wait behind a commit.
//! - `peekReplay` is the one synchronous call: the replay fast path. It reads one row
//!   on a connection whose busy timeout is zero, so it can never wait on a lock: in WAL
//!   mode a reader does not block on writers, and in the rare moments it would (WAL
//!   recovery, a checkpoint restart) it returns "not found" at once and the caller takes
//!   the async path.

mod batch;
mod fault;
mod listing;
mod open;
mod permissions;
mod queries;
mod replies;
mod retention;
mod schema;
#[cfg(feature = "test-hooks")]
mod test_rows;
mod watch;
mod writer;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::*;
use napi_derive::napi;
use rusqlite::Connection;

use crate::batch_reply::{AcquireReply, SettleReply};
use crate::claim::AcquireRequest;
use crate::clock::{now_ms, Now};
use crate::failure::{StoreFailure, StoreResult};
use crate::record::{
    NativeRecord, NativeStats, RecentQuery, RecentRecords, ReplayHit, SettleRequest, COMPLETED,
    FAILED,
};
use open::{Durability, Settings, StoreFile};
use queries::{Scope, Settle};
use replies::Replies;
use writer::Writer;

const DEFAULT_BUSY_TIMEOUT_MS: f64 = 5000.0;

#[napi(object)]
pub struct SqliteOptions {
    pub path: String,
    /// `'full'` (default) or `'normal'`.
    pub durability: Option<String>,
    pub busy_timeout_ms: Option<f64>,
    /// The project whose records this store reads and writes (default `''`).
    pub namespace: Option<String>,
    /// Every project's records, for inspection: reads, `clear` and `release` see them
    /// all; calls (`acquire` and the rest) are refused.
    pub all_namespaces: Option<bool>,
    /// How often expired records are deleted (see `retention.rs`); default 60000.
    pub prune_interval_ms: Option<f64>,
}

/// A read connection and the writer generation it was opened in.
type Reader = Mutex<Option<(Connection, u64)>>;

struct Open {
    label: String,
    scope: Scope,
    file: Arc<StoreFile>,
    /// Bumped by the writer when it had to reopen the file; readers then reopen too.
    generation: Arc<AtomicU64>,
    writer: Writer,
    /// The writes' promises (see `replies.rs`).
    replies: Arc<Replies>,
    reader: Reader,
    peek: Reader,
}

impl Open {
    /// Queues a write job, for Rust code that awaits its outcome (after the commit)
    /// rather than handing a promise to JavaScript.
    fn write_async<T, F>(&self, work: F) -> impl std::future::Future<Output = Result<T>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let label = self.label.clone();
        self.writer.submit(
            move |conn| {
                work(conn)
                    .map_err(|e| StoreFailure::at(&label, "store write failed", open::describe(e)))
            },
            Box::new(move |outcome| {
                let _ = tx.send(outcome);
            }),
        );
        async move {
            match rx.await {
                Ok(outcome) => Ok(outcome?),
                Err(_) => Err(closed().into()),
            }
        }
    }

    /// The reader's connection, reopened first if the writer has moved to a new file.
    fn current<'a>(
        &self,
        slot: &'a mut Option<(Connection, u64)>,
        busy: Duration,
    ) -> StoreResult<&'a Connection> {
        let now = self.generation.load(Ordering::SeqCst);
        match slot {
            Some((_, generation)) if *generation == now => {}
            Some(_) => *slot = Some((self.file.open_reader(busy)?, now)),
            None => return Err(closed()),
        }
        Ok(&slot.as_ref().expect("set above").0)
    }
}

#[napi]
pub struct NativeSqliteStore {
    inner: Arc<Open>,
}

fn closed() -> StoreFailure {
    StoreFailure::new("the store is closed")
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> StoreResult<T> + Send + 'static,
) -> Result<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(outcome) => Ok(outcome?),
        Err(e) if e.is_panic() => Err(StoreFailure::from_panic(e.into_panic()).into()),
        Err(e) => Err(StoreFailure::new(format!("the store's task was cancelled: {e}")).into()),
    }
}

fn open_store(options: SqliteOptions) -> StoreResult<Open> {
    let scope = if options.all_namespaces == Some(true) {
        Scope::Every
    } else {
        Scope::Project(options.namespace.clone().unwrap_or_default())
    };
    let busy_ms = options.busy_timeout_ms.unwrap_or(DEFAULT_BUSY_TIMEOUT_MS);
    let file = Arc::new(StoreFile {
        path: PathBuf::from(&options.path),
        settings: Settings {
            durability: Durability::parse(options.durability.as_deref())?,
            busy_timeout: Duration::from_millis(busy_ms.max(0.0) as u64),
        },
    });
    let label = file.label();
    let opened = file.open_writer()?;
    let retention = retention::Retention {
        interval: options
            .prune_interval_ms
            .map(|ms| Duration::from_millis(ms.max(1.0) as u64))
            .unwrap_or(retention::DEFAULT_PRUNE_INTERVAL),
    };
    // The first pass, before the store is handed out; the writer thread does the rest.
    retention.pass(&opened.0);
    let reader = file.open_reader(file.settings.busy_timeout)?;
    let peek = file.open_reader(Duration::ZERO)?;
    let generation = Arc::new(AtomicU64::new(0));
    let writer_label = label.clone();
    let replies = Replies::new();
    let flushing = replies.clone();
    let writer = Writer::start(
        file.clone(),
        opened,
        generation.clone(),
        move |e| StoreFailure::at(&writer_label, "store write failed", open::describe(e)),
        Arc::new(move || flushing.flush()),
        retention,
    )?;
    Ok(Open {
        label,
        scope,
        file,
        generation,
        writer,
        replies,
        reader: Mutex::new(Some((reader, 0))),
        peek: Mutex::new(Some((peek, 0))),
    })
}

#[napi]
impl NativeSqliteStore {
    /// Opens (creating if needed) the store file, off the JavaScript thread.
    #[napi(factory)]
    pub async fn open(options: SqliteOptions) -> Result<Self> {
        let open = blocking(move || open_store(options)).await?;
        Ok(NativeSqliteStore {
            inner: Arc::new(open),
        })
    }

    #[napi(getter)]
    pub fn path(&self) -> String {
        self.inner.label.clone()
    }

    /// The project this store's calls run in; `null` when opened for every project.
    #[napi(getter)]
    pub fn namespace(&self) -> Option<String> {
        match &self.inner.scope {
            Scope::Project(ns) => Some(ns.clone()),
            Scope::Every => None,
        }
    }

    /// Queues a write and returns its promise, which the writer thread answers once the
    /// commit is done, together with the rest of its batch: no async runtime thread in
    /// between.
    fn write<'env, T, F>(&self, env: &'env Env, work: F) -> Result<Object<'env>>
    where
        T: ToNapiValue + Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (promise, answer) = self.inner.replies.promise::<T>(env)?;
        let label = self.inner.label.clone();
        self.inner.writer.submit(
            move |conn| {
                work(conn)
                    .map_err(|e| StoreFailure::at(&label, "store write failed", open::describe(e)))
            },
            Box::new(answer),
        );
        Ok(promise)
    }

    /// Queues `items` as one write job, each item in a savepoint of its own (see
    /// `batch.rs`); the promise gets each item's answer, in order, after the commit.
    fn write_each<'env, R, T, A>(
        &self,
        env: &'env Env,
        items: Vec<R>,
        work: impl Fn(&Connection, R) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<Object<'env>>
    where
        R: Send + 'static,
        T: Send + 'static,
        A: From<StoreResult<T>> + ToNapiValue + Send + 'static,
    {
        let (promise, answer) = self.inner.replies.promise::<Vec<A>>(env)?;
        let label = self.inner.label.clone();
        self.inner.writer.submit(
            move |conn| {
                let fail = |e| StoreFailure::at(&label, "store write failed", open::describe(e));
                let outcomes = batch::each_in_savepoint(conn, items, fail, |conn, item| {
                    work(conn, item).map_err(fail)
                })?;
                Ok(outcomes.into_iter().map(A::from).collect())
            },
            Box::new(answer),
        );
        Ok(promise)
    }

    async fn read<T, F>(&self, what: &'static str, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        blocking(move || {
            // A panic in an earlier read (a bug) poisons the lock; the connection is still
            // good, and refusing every later read as "closed" would take the store down.
            let mut guard = inner
                .reader
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let conn = inner.current(&mut guard, inner.file.settings.busy_timeout)?;
            work(conn).map_err(|e| StoreFailure::at(&inner.label, what, open::describe(e)))
        })
        .await
    }

    /// The project calls run in; a store opened for every project runs no calls.
    fn project(&self) -> Result<String> {
        match &self.inner.scope {
            Scope::Project(ns) => Ok(ns.clone()),
            Scope::Every => Err(StoreFailure::new(format!(
                "the store at {} was opened to inspect every project (allNamespaces); it cannot run calls: open it with a namespace",
                self.inner.label
            ))
            .into()),
        }
    }

    #[napi(ts_return_type = "Promise<AcquireOutcome>")]
    pub fn acquire<'env>(&self, env: &'env Env, request: AcquireRequest) -> Result<Object<'env>> {
        let ns = self.project()?;
        self.write(env, move |conn| {
            fault::panic_point("acquire");
            queries::acquire(conn, &ns, &request, &Now::current())
        })
    }

    /// The acquires issued in one turn of the event loop, in one crossing and one writer
    /// job (see `batch.rs`); each answer is the outcome `acquire` would have given, or
    /// the message of that call's own failure.
    #[napi(ts_return_type = "Promise<Array<AcquireReply>>")]
    pub fn acquire_batch<'env>(
        &self,
        env: &'env Env,
        requests: Vec<AcquireRequest>,
    ) -> Result<Object<'env>> {
        let ns = self.project()?;
        self.write_each::<_, _, AcquireReply>(env, requests, move |conn, request| {
            fault::panic_point("acquire");
            queries::acquire(conn, &ns, &request, &Now::current())
        })
    }

    /// The completes issued in one turn of the event loop, as `acquire_batch`.
    #[napi(ts_return_type = "Promise<Array<SettleReply>>")]
    pub fn complete_batch<'env>(
        &self,
        env: &'env Env,
        requests: Vec<SettleRequest>,
    ) -> Result<Object<'env>> {
        let ns = self.project()?;
        self.write_each::<_, _, SettleReply>(env, requests, move |conn, r| {
            fault::panic_point("complete");
            queries::settle(conn, &ns, &settle_of(&r, COMPLETED), &Now::current())
        })
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn renew<'env>(
        &self,
        env: &'env Env,
        key: String,
        token: String,
        lease_ms: f64,
    ) -> Result<Object<'env>> {
        let ns = self.project()?;
        self.write(env, move |conn| {
            queries::renew(conn, &ns, &key, &token, lease_ms, &Now::current())
        })
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn complete<'env>(&self, env: &'env Env, request: SettleRequest) -> Result<Object<'env>> {
        self.settle(env, COMPLETED, request)
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn fail<'env>(&self, env: &'env Env, request: SettleRequest) -> Result<Object<'env>> {
        self.settle(env, FAILED, request)
    }

    fn settle<'env>(
        &self,
        env: &'env Env,
        status: &'static str,
        r: SettleRequest,
    ) -> Result<Object<'env>> {
        let ns = self.project()?;
        self.write(env, move |conn| {
            if status == COMPLETED {
                fault::panic_point("complete");
            }
            queries::settle(conn, &ns, &settle_of(&r, status), &Now::current())
        })
    }

    /// Frees a stuck pending record (see `queries::release`); `reconcile` defaults to true.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(
        &self,
        env: &'env Env,
        key: String,
        reconcile: Option<bool>,
    ) -> Result<Object<'env>> {
        let scope = self.inner.scope.clone();
        let reconcile = reconcile.unwrap_or(true);
        self.write(env, move |conn| {
            queries::release(conn, &scope, &key, now_ms(), reconcile)
        })
    }

    /// Gives the settled records among `keys` the expiry `expiresAt` (epoch ms); see
    /// `queries::expire_settled`. Resolves with how many changed.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn expire_settled<'env>(
        &self,
        env: &'env Env,
        keys: Vec<String>,
        expires_at: f64,
    ) -> Result<Object<'env>> {
        let ns = self.project()?;
        let at = expires_at.floor() as i64;
        self.write(env, move |conn| {
            queries::expire_settled(conn, &ns, &keys, at)
        })
    }

    #[napi(ts_return_type = "Promise<number>")]
    pub fn clear<'env>(&self, env: &'env Env, key: Option<String>) -> Result<Object<'env>> {
        let scope = self.inner.scope.clone();
        self.write(env, move |conn| {
            queries::clear(conn, &scope, key.as_deref())
        })
    }

    /// Deletes this scope's settled records that have expired by now, in passes of at
    /// most `PRUNE_BATCH` (see `retention::prune_walk`), each its own writer job: this
    /// process's other writes are committed between them, and the file's write lock is
    /// let go between them for other processes'. Resolves with how many were deleted.
    #[napi]
    pub async fn prune(&self) -> Result<u32> {
        let inner = self.inner.clone();
        // One instant for the whole walk, so it ends even while records keep expiring.
        let now = now_ms();
        let mut after = retention::START;
        let mut deleted = 0;
        loop {
            let started = Instant::now();
            let ns = inner.scope.filter().map(str::to_owned);
            let pass = inner
                .write_async(move |conn| {
                    retention::prune_walk(conn, ns.as_deref(), now, after, retention::PRUNE_BATCH)
                })
                .await?;
            deleted += pass.deleted;
            let Some(mark) = pass.next else {
                return Ok(deleted);
            };
            after = mark;
            // SQLite's lock has no queue: another process waiting for it sleeps and polls,
            // and would rarely find it free if the next pass took it right back. So the
            // lock stays free as long as the pass held it (at most half the time is ours).
            tokio::time::sleep(started.elapsed()).await;
        }
    }

    #[napi]
    pub async fn get(&self, key: String) -> Result<Option<NativeRecord>> {
        let scope = self.inner.scope.clone();
        self.read("store read failed", move |conn| {
            fault::panic_point("get");
            let now = Now::current();
            let own = queries::read(conn, &scope, &key)?;
            let found = match (own, &scope) {
                (None, Scope::Project(ns)) => queries::read_legacy(conn, ns, &key)?,
                (own, _) => own,
            };
            Ok(found.filter(|r| !r.expired(&now)).map(Into::into))
        })
        .await
    }

    #[napi]
    pub async fn list_records(
        &self,
        status: Option<String>,
        limit: Option<u32>,
    ) -> Result<Vec<NativeRecord>> {
        let scope = self.inner.scope.clone();
        self.read("store read failed", move |conn| {
            let records = queries::list(conn, &scope, status.as_deref(), limit, &Now::current())?;
            Ok(records.into_iter().map(Into::into).collect())
        })
        .await
    }

    /// The newest matching records, filtered in the query and without results unless
    /// asked (the inspector's listing; see `listing.rs`).
    #[napi]
    pub async fn list_recent(&self, query: RecentQuery) -> Result<RecentRecords> {
        let scope = self.inner.scope.clone();
        self.read("store read failed", move |conn| {
            let q = listing::Recent {
                status: query.status.as_deref(),
                name: query.name.as_deref(),
                updated_since: query.updated_since.map(|t| t.floor() as i64),
                limit: query.limit,
                with_results: query.with_results == Some(true),
            };
            let (records, matched) = listing::recent(conn, &scope, &q, &Now::current())?;
            Ok(RecentRecords {
                records: records.into_iter().map(Into::into).collect(),
                matched,
            })
        })
        .await
    }

    #[napi]
    pub async fn stats(&self) -> Result<NativeStats> {
        let scope = self.inner.scope.clone();
        self.read("store read failed", move |conn| {
            queries::stats(conn, &scope, &Now::current())
        })
        .await
    }

    /// The wrapper's replay fast path (synchronous): the stored outcome of `key`'s record
    /// if it is completed, unexpired and was made with `fingerprint`; `null` otherwise, or
    /// whenever the row cannot be read without waiting. Three columns, three fields: the
    /// less crosses into JavaScript, the faster a replay.
    #[napi(catch_unwind)]
    pub fn peek_replay(&self, key: String, fingerprint: String) -> Result<Option<ReplayHit>> {
        // A panic here (a bug) must not become an exception on the replay fast path: it is
        // "not found", and the async path then decides and reports.
        let peek = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.peek(&key, &fingerprint)
        }));
        Ok(peek.unwrap_or(None))
    }

    /// The replay fast path of a call under a derived key, in one crossing: hashes the
    /// call (as `callHashes`) and reads its record (as `peekReplay`). The answer is one
    /// string, only what a replay uses: `r` and the result's JSON text, `u` (the result
    /// was `undefined`), or `e` and the error's JSON text (a result that could not be
    /// stored); `null` for anything else (no completed record, another fingerprint, a row
    /// that cannot be read without waiting): the wrapper then takes the async path.
    #[napi(catch_unwind)]
    pub fn replay_call(
        &self,
        name: String,
        context: Option<String>,
        payload: String,
    ) -> Result<Option<String>> {
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let fingerprint = crate::hashing::fingerprint_of(&name, Some(&payload));
            let key = crate::hashing::derived_key(&name, context.as_deref(), &payload);
            self.peek(&key, &fingerprint)
        }));
        Ok(found.ok().flatten().map(|hit| match hit {
            ReplayHit { error: Some(e), .. } => format!("e{e}"),
            ReplayHit {
                result: Some(r), ..
            } => format!("r{r}"),
            ReplayHit { result: None, .. } => "u".to_string(),
        }))
    }

    fn peek(&self, key: &str, fingerprint: &str) -> Option<ReplayHit> {
        let Scope::Project(ns) = &self.inner.scope else {
            return None;
        };
        let mut guard = match self.inner.peek.try_lock() {
            Ok(guard) => guard,
            // An earlier panic while reading: the connection itself is still usable.
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        let conn = self.inner.current(&mut guard, Duration::ZERO).ok()?;
        fault::panic_point("peek");
        queries::read_replay(conn, ns, key, fingerprint, now_ms())
            .ok()
            .flatten()
    }

    /// Finishes queued writes and closes the file. Later calls fail with "closed".
    #[napi]
    pub async fn close(&self) -> Result<()> {
        let inner = self.inner.clone();
        blocking(move || {
            inner.writer.stop();
            inner
                .reader
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            inner.peek.lock().unwrap_or_else(|p| p.into_inner()).take();
            Ok(())
        })
        .await
    }
}

/// What a settle request writes, as `status`.
fn settle_of<'a>(r: &'a SettleRequest, status: &'static str) -> Settle<'a> {
    Settle {
        key: &r.key,
        token: &r.token,
        status,
        result: r.result.as_deref(),
        error: r.error.as_deref(),
        ttl_ms: r.ttl_ms,
        duration_ms: r.duration_ms,
    }
}
