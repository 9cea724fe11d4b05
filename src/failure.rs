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
