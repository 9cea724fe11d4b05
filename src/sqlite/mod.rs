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

mod open;
mod queries;
mod writer;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use rusqlite::Connection;

use crate::claim::AcquireRequest;
use crate::clock::now_ms;
use crate::failure::{StoreFailure, StoreResult};
use crate::record::{NativeRecord, NativeStats, ReplayHit, SettleRequest, COMPLETED, FAILED};
use open::{Durability, Settings, StoreFile};
use writer::Writer;

const DEFAULT_BUSY_TIMEOUT_MS: f64 = 5000.0;

#[napi(object)]
pub struct SqliteOptions {
    pub path: String,
    /// `'full'` (default) or `'normal'`.
    pub durability: Option<String>,
    pub busy_timeout_ms: Option<f64>,
}

/// A read connection and the writer generation it was opened in.
type Reader = Mutex<Option<(Connection, u64)>>;

struct Open {
    label: String,
    file: Arc<StoreFile>,
    /// Bumped by the writer when it had to reopen the file; readers then reopen too.
    generation: Arc<AtomicU64>,
    writer: Writer,
    reader: Reader,
    peek: Reader,
}

impl Open {
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
    let reader = file.open_reader(file.settings.busy_timeout)?;
    let peek = file.open_reader(Duration::ZERO)?;
    let generation = Arc::new(AtomicU64::new(0));
    let writer_label = label.clone();
    let writer = Writer::start(file.clone(), opened, generation.clone(), move |e| {
        StoreFailure::at(&writer_label, "store write failed", open::describe(e))
    })?;
    Ok(Open {
        label,
        file,
        generation,
        writer,
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

    /// Queues a write and returns its promise, which the writer thread settles itself
    /// once the commit is done: no async runtime thread in between.
    fn write<'env, T, F>(&self, env: &'env Env, work: F) -> Result<Object<'env>>
    where
        T: ToNapiValue + Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (deferred, promise) = env.create_deferred::<T, Box<dyn FnOnce(Env) -> Result<T>>>()?;
        let label = self.inner.label.clone();
        self.inner.writer.submit(
            move |conn| {
                work(conn)
                    .map_err(|e| StoreFailure::at(&label, "store write failed", open::describe(e)))
            },
            Box::new(move |outcome| match outcome {
                Ok(value) => deferred.resolve(Box::new(move |_| Ok(value))),
                Err(failure) => deferred.reject(failure.into()),
            }),
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
            let mut guard = inner.reader.lock().map_err(|_| closed())?;
            let conn = inner.current(&mut guard, inner.file.settings.busy_timeout)?;
            work(conn).map_err(|e| StoreFailure::at(&inner.label, what, open::describe(e)))
        })
        .await
    }

    #[napi(ts_return_type = "Promise<AcquireOutcome>")]
    pub fn acquire<'env>(&self, env: &'env Env, request: AcquireRequest) -> Result<Object<'env>> {
        self.write(env, move |conn| queries::acquire(conn, &request, now_ms()))
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn renew<'env>(
        &self,
        env: &'env Env,
        key: String,
        token: String,
        lease_ms: f64,
    ) -> Result<Object<'env>> {
        self.write(env, move |conn| {
            queries::renew(conn, &key, &token, lease_ms, now_ms())
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
        r.check()?;
        self.write(env, move |conn| {
            queries::settle(
                conn,
                &r.key,
                &r.token,
                status,
                r.result.as_deref(),
                r.error.as_deref(),
                r.ttl_ms,
                now_ms(),
            )
        })
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(&self, env: &'env Env, key: String) -> Result<Object<'env>> {
        self.write(env, move |conn| queries::release(conn, &key, now_ms()))
    }

    #[napi(ts_return_type = "Promise<number>")]
    pub fn clear<'env>(&self, env: &'env Env, key: Option<String>) -> Result<Object<'env>> {
        self.write(env, move |conn| queries::clear(conn, key.as_deref()))
    }

    #[napi(ts_return_type = "Promise<number>")]
    pub fn prune<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        self.write(env, move |conn| queries::prune(conn, now_ms()))
    }

    #[napi]
    pub async fn get(&self, key: String) -> Result<Option<NativeRecord>> {
        self.read("store read failed", move |conn| {
            let now = now_ms();
            Ok(queries::read(conn, &key)?
                .filter(|r| !r.expired(now))
                .map(Into::into))
        })
        .await
    }

    #[napi]
    pub async fn list_records(
        &self,
        status: Option<String>,
        limit: Option<u32>,
    ) -> Result<Vec<NativeRecord>> {
        self.read("store read failed", move |conn| {
            Ok(queries::list(conn, status.as_deref(), limit, now_ms())?
                .into_iter()
                .map(Into::into)
                .collect())
        })
        .await
    }

    #[napi]
    pub async fn stats(&self) -> Result<NativeStats> {
        self.read("store read failed", move |conn| {
            queries::stats(conn, now_ms())
        })
        .await
    }

    /// The wrapper's replay fast path (synchronous): the stored outcome of `key`'s record
    /// if it is completed, unexpired and was made with `fingerprint`; `null` otherwise, or
    /// whenever the row cannot be read without waiting. Three columns, three fields: the
    /// less crosses into JavaScript, the faster a replay.
    #[napi(catch_unwind)]
    pub fn peek_replay(&self, key: String, fingerprint: String) -> Result<Option<ReplayHit>> {
        let Ok(mut guard) = self.inner.peek.try_lock() else {
            return Ok(None);
        };
        let Ok(conn) = self.inner.current(&mut guard, Duration::ZERO) else {
            return Ok(None);
        };
        Ok(queries::read_replay(conn, &key, &fingerprint, now_ms())
            .ok()
            .flatten())
    }

    /// Finishes queued writes and closes the file. Later calls fail with "closed".
    #[napi]
    pub async fn close(&self) -> Result<()> {
        let inner = self.inner.clone();
        blocking(move || {
            inner.writer.stop();
            if let Ok(mut c) = inner.reader.lock() {
                c.take();
            }
            if let Ok(mut c) = inner.peek.lock() {
                c.take();
            }
            Ok(())
        })
        .await
    }
}
