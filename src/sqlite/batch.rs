//! A turn's claims, or a turn's settles, as one writer job (see `lib/stores/batch.ts`,
//! which gathers the calls issued in one turn of the event loop and sends them in one
//! crossing). One job is one promise, one savepoint in the group commit and one answer
//! on the way back, where each call would be its own; and the whole turn lands in one
//! transaction, where the writer might otherwise commit its first call alone while the
//! rest were still being queued.
//!
//! Each item still runs in a savepoint of its own, so one item's failure (or a panic, a
//! bug) rolls back and answers only that item, exactly as a job of its own would.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rusqlite::Connection;

use crate::failure::{StoreFailure, StoreResult};

/// Runs `work` on each item in a savepoint of its own; each item's outcome, in order.
/// Fails as a whole only when SQLite rolled back the whole transaction (a full disk, an
/// I/O error): then nothing of the batch was written, and the batch's job fails with that
/// item's cause, as a lone job's would.
pub fn each_in_savepoint<R, T>(
    conn: &Connection,
    items: Vec<R>,
    describe: impl Fn(rusqlite::Error) -> StoreFailure,
    mut work: impl FnMut(&Connection, R) -> StoreResult<T>,
) -> StoreResult<Vec<StoreResult<T>>> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        run(conn, "SAVEPOINT item").map_err(&describe)?;
        let outcome = catch_unwind(AssertUnwindSafe(|| work(conn, item)))
            .unwrap_or_else(|p| Err(StoreFailure::from_panic(p)));
        match &outcome {
            Ok(_) => run(conn, "RELEASE item").map_err(&describe)?,
            Err(failure) if conn.is_autocommit() => return Err(failure.clone()),
            Err(_) => {
                run(conn, "ROLLBACK TO item").map_err(&describe)?;
                run(conn, "RELEASE item").map_err(&describe)?;
            }
        }
        out.push(outcome);
    }
    Ok(out)
}

/// A savepoint statement, prepared once per connection (parsing it again for every item
/// and every job was a measurable part of the writer thread's time).
pub fn run(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}
