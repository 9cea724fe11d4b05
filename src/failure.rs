//! The one error type of the core. Every failure that reaches JavaScript is a plain
//! message (the TypeScript layer wraps it in `StoreError`); panics are turned into
//! failures at each entry point so that none ever crosses into Node.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFailure {
    pub message: String,
}

impl StoreFailure {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// A failure of the store at `location` (a file path or a server address).
    pub fn at(location: &str, what: &str, cause: impl fmt::Display) -> Self {
        Self::new(format!("{what} ({location}): {cause}"))
    }

    pub fn from_panic(payload: Box<dyn std::any::Any + Send>) -> Self {
        let detail = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        Self::new(format!(
            "internal error in the native store (a bug, please report it): {detail}"
        ))
    }
}

impl fmt::Display for StoreFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreFailure {}

impl From<StoreFailure> for napi::Error {
    fn from(failure: StoreFailure) -> Self {
        napi::Error::from_reason(failure.message)
    }
}

pub type StoreResult<T> = Result<T, StoreFailure>;

/// Runs an async store operation and turns a panic in it (a bug) into a failure, so that
/// none crosses into Node.
pub async fn guarded<T>(
    work: impl std::future::Future<Output = StoreResult<T>>,
) -> napi::Result<T> {
    Ok(catch_panics(work).await?)
}

/// `work`'s outcome, or a panic in it as a failure. The work is polled in place: it
/// already runs on a Tokio task (napi's), and a task of its own would cost every call a
/// spawn and a cross-task wake. After a panic the work is dropped, never polled again.
pub async fn catch_panics<T>(
    work: impl std::future::Future<Output = StoreResult<T>>,
) -> StoreResult<T> {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::task::Poll;
    let mut work = std::pin::pin!(work);
    std::future::poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => Poll::Ready(Err(StoreFailure::from_panic(panic))),
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_in_the_work_is_a_failure_even_after_an_await() {
        let before: StoreResult<u8> = catch_panics(async { panic!("at once") }).await;
        assert!(before
            .unwrap_err()
            .message
            .contains("internal error in the native store (a bug, please report it): at once"));
        let after: StoreResult<u8> = catch_panics(async {
            tokio::task::yield_now().await;
            panic!("after a yield")
        })
        .await;
        assert!(after.unwrap_err().message.contains("after a yield"));
        let fine = catch_panics(async {
            tokio::task::yield_now().await;
            Ok(7)
        })
        .await;
        assert_eq!(fine.unwrap(), 7);
        let failed: StoreResult<u8> = catch_panics(async { Err(StoreFailure::new("no")) }).await;
        assert_eq!(failed.unwrap_err().message, "no");
    }
}
