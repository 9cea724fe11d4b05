//! `SqliteStore`'s native half: one file, one writer thread, two read connections.
//!
//! - Writes (`acquire`, `renew`, `complete`, `fail`, `release`, `clear`, `prune`) go to
//!   the writer thread, which commits them in groups (see `writer.rs`).
//! - Async reads (`get`, `listRecords`, `stats`) run on Tokio's blocking pool on their
//!   own connection, so they never wait behind a commit.
//! - `peekCompleted` is the one synchronous call: the replay fast path. It reads one row
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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use rusqlite::Connection;

use crate::claim::{AcquireOutcome, AcquireRequest};
use crate::clock::now_ms;
use crate::failure::{StoreFailure, StoreResult};
use crate::record::{NativeRecord, NativeStats, COMPLETED, FAILED};
use open::{Durability, Settings};
use writer::Writer;

const DEFAULT_BUSY_TIMEOUT_MS: f64 = 5000.0;

#[napi(object)]
pub struct SqliteOptions {
    pub path: String,
    /// `'full'` (default) or `'normal'`.
    pub durability: Option<String>,
    pub busy_timeout_ms: Option<f64>,
}

#[napi(object)]
pub struct SettleRequest {
    pub key: String,
    pub token: String,
    /// JSON text of the result (`completed` only); absent for `undefined`.
    pub result: Option<String>,
    /// JSON text `{"name","message"}`.
    pub error: Option<String>,
    pub ttl_ms: Option<f64>,
}

struct Open {
    label: String,
    writer: Writer,
    reader: Mutex<Option<Connection>>,
    peek: Mutex<Option<Connection>>,
}

#[napi]
pub struct NativeSqliteStore {
    inner: Arc<Open>,
}

fn closed() -> StoreFailure {
    StoreFailure::new("the store is closed")
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> StoreResult<T> + Send + 'static) -> Result<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(outcome) => Ok(outcome?),
        Err(e) if e.is_panic() => Err(StoreFailure::from_panic(e.into_panic()).into()),
        Err(e) => Err(StoreFailure::new(format!("the store's task was cancelled: {e}")).into()),
    }
}

fn open_store(options: SqliteOptions) -> StoreResult<Open> {
    let path = PathBuf::from(&options.path);
    let label = path.display().to_string();
    let busy_ms = options.busy_timeout_ms.unwrap_or(DEFAULT_BUSY_TIMEOUT_MS);
    let settings = Settings {
        durability: Durability::parse(options.durability.as_deref())?,
        busy_timeout: Duration::from_millis(busy_ms.max(0.0) as u64),
    };
    open::prepare_path(&path)?;
    let write_conn = open::connect(&path, &settings)?;
    open::initialize(&write_conn, &path, &settings)?;
    let reader = open::connect(&path, &settings)?;
    let peek = open::connect(&path, &Settings { busy_timeout: Duration::ZERO, ..settings.clone() })?;
    let writer_label = label.clone();
    let writer = Writer::start(write_conn, move |e| StoreFailure::at(&writer_label, "store write failed", open::describe(e)))?;
    Ok(Open { label, writer, reader: Mutex::new(Some(reader)), peek: Mutex::new(Some(peek)) })
}

#[napi]
impl NativeSqliteStore {
    /// Opens (creating if needed) the store file, off the JavaScript thread.
    #[napi(factory)]
    pub async fn open(options: SqliteOptions) -> Result<Self> {
        let open = blocking(move || open_store(options)).await?;
        Ok(NativeSqliteStore { inner: Arc::new(open) })
    }

    #[napi(getter)]
    pub fn path(&self) -> String {
        self.inner.label.clone()
    }

    async fn write<T, F>(&self, what: &'static str, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let label = self.inner.label.clone();
        let outcome = self
            .inner
            .writer
            .write(move |conn| work(conn).map_err(|e| StoreFailure::at(&label, what, open::describe(e))))
            .await;
        Ok(outcome?)
    }

    async fn read<T, F>(&self, what: &'static str, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        blocking(move || {
            let guard = inner.reader.lock().map_err(|_| closed())?;
            let conn = guard.as_ref().ok_or_else(closed)?;
            work(conn).map_err(|e| StoreFailure::at(&inner.label, what, open::describe(e)))
        })
        .await
    }

    #[napi]
    pub async fn acquire(&self, request: AcquireRequest) -> Result<AcquireOutcome> {
        self.write("store write failed", move |conn| queries::acquire(conn, &request, now_ms())).await
    }

    #[napi]
    pub async fn renew(&self, key: String, token: String, lease_ms: f64) -> Result<bool> {
        self.write("store write failed", move |conn| queries::renew(conn, &key, &token, lease_ms, now_ms())).await
    }

    #[napi]
    pub async fn complete(&self, request: SettleRequest) -> Result<bool> {
        self.settle(COMPLETED, request).await
    }

    #[napi]
    pub async fn fail(&self, request: SettleRequest) -> Result<bool> {
        self.settle(FAILED, request).await
    }

    async fn settle(&self, status: &'static str, r: SettleRequest) -> Result<bool> {
        self.write("store write failed", move |conn| {
            queries::settle(conn, &r.key, &r.token, status, r.result.as_deref(), r.error.as_deref(), r.ttl_ms, now_ms())
        })
        .await
    }

    #[napi]
    pub async fn release(&self, key: String) -> Result<bool> {
        self.write("store write failed", move |conn| queries::release(conn, &key, now_ms())).await
    }

    #[napi]
    pub async fn clear(&self, key: Option<String>) -> Result<u32> {
        self.write("store write failed", move |conn| queries::clear(conn, key.as_deref())).await
    }

    #[napi]
    pub async fn prune(&self) -> Result<u32> {
        self.write("store write failed", move |conn| queries::prune(conn, now_ms())).await
    }

    #[napi]
    pub async fn get(&self, key: String) -> Result<Option<NativeRecord>> {
        self.read("store read failed", move |conn| {
            let now = now_ms();
            Ok(queries::read(conn, &key)?.filter(|r| !r.expired(now)).map(Into::into))
        })
        .await
    }

    #[napi]
    pub async fn list_records(&self, status: Option<String>, limit: Option<u32>) -> Result<Vec<NativeRecord>> {
        self.read("store read failed", move |conn| {
            Ok(queries::list(conn, status.as_deref(), limit, now_ms())?.into_iter().map(Into::into).collect())
        })
        .await
    }

    #[napi]
    pub async fn stats(&self) -> Result<NativeStats> {
        self.read("store read failed", move |conn| queries::stats(conn, now_ms())).await
    }

    /// The replay fast path (synchronous): the key's record if it is `completed` and not
    /// expired; `null` otherwise, or whenever the row cannot be read without waiting.
    #[napi(catch_unwind)]
    pub fn peek_completed(&self, key: String) -> Result<Option<NativeRecord>> {
        let Ok(guard) = self.inner.peek.try_lock() else { return Ok(None) };
        let Some(conn) = guard.as_ref() else { return Ok(None) };
        let now = now_ms();
        Ok(match queries::read(conn, &key) {
            Ok(Some(r)) if r.status == COMPLETED && !r.expired(now) => Some(r.into()),
            _ => None,
        })
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
