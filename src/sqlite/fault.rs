//! INTERNAL, for this package's tests only: `IDEMPOTENT_TOOLS_TEST_NATIVE_PANIC=<point>`
//! makes the native SQLite store panic once, at that point, so the tests can check that a
//! bug in the core becomes a `StoreError` (or, on the replay fast path, a fall-back to the
//! async path) and never takes the process down. Points: `acquire` and `complete` (inside
//! a writer job), `get` (on a blocking read), `peek` (the synchronous replay read).
//! Read once; unset, `panic_point` only compares a cached `None`. Only in a build with the
//! `test-hooks` feature; what users install has an empty `panic_point`.

#[cfg(feature = "test-hooks")]
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(feature = "test-hooks")]
use std::sync::OnceLock;

#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn panic_point(_point: &str) {}

#[cfg(feature = "test-hooks")]
pub fn panic_point(point: &str) {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    static FIRED: AtomicBool = AtomicBool::new(false);
    let armed = ARMED.get_or_init(|| std::env::var("IDEMPOTENT_TOOLS_TEST_NATIVE_PANIC").ok());
    if armed.as_deref() == Some(point) && !FIRED.swap(true, Ordering::SeqCst) {
        panic!("injected panic at {point} (IDEMPOTENT_TOOLS_TEST_NATIVE_PANIC)");
    }
}
