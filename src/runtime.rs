//! The Tokio runtime that the Redis and Postgres stores' async methods run on.
//!
//! One worker thread, not one per core (napi-rs's default). The work on it is network
//! I/O: a call's task hands its command to the connection's task and waits for the reply.
//! With several workers those two tasks wake each other across threads; with one they
//! stay on the same thread. Measured (bench/RESULTS.md, "Redis (issue 13)"): one at a time,
//! a Redis replay 0.83x @node-idempotency/core's time instead of 1.02x and a new call 1.66x
//! instead of 1.96x; 64 in flight no worse on Redis, better on Postgres. The SQLite store
//! uses only its blocking pool, for `get`, `listRecords` and `stats` (its writes have their
//! own thread, its replay read runs on the JavaScript thread). `TOKIO_WORKER_THREADS`
//! (Tokio's own variable) still sets the count.

fn worker_threads() -> usize {
    std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

#[napi_derive::module_init]
fn init() {
    // If the runtime cannot be built here, napi-rs builds its default one on first use.
    if let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .thread_name("idempotent-io")
        .enable_all()
        .build()
    {
        napi::bindgen_prelude::create_custom_tokio_runtime(rt);
    }
}
