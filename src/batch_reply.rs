//! What a batch of calls answers across napi, one entry per call in the order given: the
//! call's outcome, or the message of its own failure (one call's trouble is not another's).
//! Shared by the stores that take batches (`redis_store::batch`, `postgres`).

use napi_derive::napi;

use crate::claim::AcquireOutcome;
use crate::failure::StoreResult;

/// One acquire's answer in a batch: its outcome, or the message of its failure.
#[napi(object)]
pub struct AcquireReply {
    pub outcome: Option<AcquireOutcome>,
    pub error: Option<String>,
}

/// One settle's answer in a batch.
#[napi(object)]
pub struct SettleReply {
    pub settled: Option<bool>,
    pub error: Option<String>,
}

/// A call's result as the two optional fields a reply carries.
fn split<T>(result: StoreResult<T>) -> (Option<T>, Option<String>) {
    match result {
        Ok(value) => (Some(value), None),
        Err(e) => (None, Some(e.message)),
    }
}

impl From<StoreResult<AcquireOutcome>> for AcquireReply {
    fn from(result: StoreResult<AcquireOutcome>) -> Self {
        let (outcome, error) = split(result);
        AcquireReply { outcome, error }
    }
}

impl From<StoreResult<bool>> for SettleReply {
    fn from(result: StoreResult<bool>) -> Self {
        let (settled, error) = split(result);
        SettleReply { settled, error }
    }
}
