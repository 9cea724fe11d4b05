//! Native core of `idempotent-tools`.
//!
//! The Rust side owns what must be exact or atomic: key hashing (`hashing`), record
//! storage in SQLite (`sqlite`) and Redis (`redis_store`), and the one atomic claim rule
//! that both stores apply (`claim`). The TypeScript layer above owns the call protocol.

#![deny(clippy::all)]

mod batch_reply;
mod claim;
mod clock;
mod failure;
mod hashing;
mod network_store;
mod postgres;
mod record;
mod redis_store;
mod runtime;
mod sqlite;
#[cfg(test)]
mod test_requests;
mod token;

pub use hashing::{call_hashes, fingerprint, key_id};
pub use postgres::{sql::postgres_sql, NativePostgresStore};
pub use redis_store::NativeRedisStore;
pub use sqlite::NativeSqliteStore;

/// Whether this binary was built with the `test-hooks` feature (the tests' own build):
/// only then do the test hooks (`IDEMPOTENT_TOOLS_FAULT` in lib/fault.ts and the ones in
/// src/clock.rs and src/sqlite/fault.rs) act. What users install answers false.
#[napi_derive::napi]
pub fn test_hooks() -> bool {
    cfg!(feature = "test-hooks")
}
