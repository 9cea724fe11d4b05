//! The change signal of a SQLite store, for `inspect --follow` and the inspector page:
//! `PRAGMA data_version` on a connection of its own, which changes whenever any other
//! connection (another thread, another process) commits to the file. Asking costs one
//! look at the WAL index in shared memory, so followers can ask often without touching
//! the records; they read them only after a change.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use rusqlite::{Connection, OpenFlags};

use crate::failure::{StoreFailure, StoreResult};

#[napi]
pub struct SqliteChangeWatch {
    path: String,
    conn: Arc<Mutex<Option<Connection>>>,
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> StoreResult<T> + Send + 'static,
) -> Result<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(outcome) => Ok(outcome?),
        Err(e) if e.is_panic() => Err(StoreFailure::from_panic(e.into_panic()).into()),
        Err(e) => Err(StoreFailure::new(format!("the watch's task was cancelled: {e}")).into()),
    }
}

/// Opens an existing store file without creating anything: a follower must never make
/// a store appear where there was none.
fn open(path: &str) -> StoreResult<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| StoreFailure::at(path, "cannot watch the store", e))?;
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(|e| StoreFailure::at(path, "cannot watch the store", e))?;
    Ok(conn)
}

#[napi]
impl SqliteChangeWatch {
    /// Opens a watch on the store file at `path` (which must exist).
    #[napi(factory)]
    pub async fn open(path: String) -> Result<Self> {
        let p = path.clone();
        let conn = blocking(move || open(&p)).await?;
        Ok(SqliteChangeWatch {
            path,
            conn: Arc::new(Mutex::new(Some(conn))),
        })
    }

    /// A number that differs from the last one whenever the file changed in between.
    #[napi]
    pub async fn version(&self) -> Result<f64> {
        let conn = self.conn.clone();
        let path = self.path.clone();
        blocking(move || {
            let guard = conn
                .lock()
                .map_err(|_| StoreFailure::new("the watch is closed"))?;
            let conn = guard
                .as_ref()
                .ok_or_else(|| StoreFailure::new("the watch is closed"))?;
            conn.query_row("PRAGMA data_version", [], |row| row.get::<_, i64>(0))
                .map(|v| v as f64)
                .map_err(|e| StoreFailure::at(&path, "cannot read the store's change counter", e))
        })
        .await
    }

    #[napi]
    pub async fn close(&self) -> Result<()> {
        let conn = self.conn.clone();
        blocking(move || {
            if let Ok(mut c) = conn.lock() {
                c.take();
            }
            Ok(())
        })
        .await
    }
}
