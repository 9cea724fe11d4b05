//! One crossing for a burst: `acquireBatch` and `completeBatch` take every call that the
//! JavaScript side issued in one turn of the event loop, run them concurrently (so they
//! go out pipelined on the multiplexed connection), and answer them all through one
//! promise, settled by one callback into JavaScript. Each call keeps its own outcome or
//! error (a panic in one call fails only that call).

use std::future::Future;
use std::sync::Arc;

use napi_derive::napi;

use crate::claim::{AcquireOutcome, AcquireRequest};
use crate::failure::{StoreFailure, StoreResult};
use crate::record::{SettleRequest, COMPLETED};

use super::Inner;

/// One call's answer in a batch: its outcome, or the message of its failure.
#[napi(object)]
pub struct AcquireReply {
    pub outcome: Option<AcquireOutcome>,
    pub error: Option<String>,
}

#[napi(object)]
pub struct SettleReply {
    pub settled: Option<bool>,
    pub error: Option<String>,
}

/// Runs `op` on every request as its own Tokio task; the results in the requests' order.
async fn each<R, T, F, Fut>(inner: &Arc<Inner>, requests: Vec<R>, op: F) -> Vec<StoreResult<T>>
where
    R: Send + 'static,
    T: Send + 'static,
    F: Fn(Arc<Inner>, R) -> Fut,
    Fut: Future<Output = StoreResult<T>> + Send + 'static,
{
    let n = requests.len();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, r) in requests.into_iter().enumerate() {
        let work = op(inner.clone(), r);
        tasks.spawn(async move { (i, work.await) });
    }
    let mut out: Vec<Option<StoreResult<T>>> = (0..n).map(|_| None).collect();
    while let Some(done) = tasks.join_next().await {
        // A task that panicked loses its index; its slot left empty reports it below.
        if let Ok((i, result)) = done {
            out[i] = Some(result);
        }
    }
    out.into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(StoreFailure::new(
                    "internal error in the native store (a bug, please report it): a batched call panicked",
                ))
            })
        })
        .collect()
}

pub async fn acquire(inner: Arc<Inner>, requests: Vec<AcquireRequest>) -> Vec<AcquireReply> {
    each(&inner, requests, |s, r| async move { s.acquire(r).await })
        .await
        .into_iter()
        .map(|r| match r {
            Ok(outcome) => AcquireReply {
                outcome: Some(outcome),
                error: None,
            },
            Err(e) => AcquireReply {
                outcome: None,
                error: Some(e.message),
            },
        })
        .collect()
}

pub async fn complete(inner: Arc<Inner>, requests: Vec<SettleRequest>) -> Vec<SettleReply> {
    each(&inner, requests, |s, r| async move {
        s.settle(COMPLETED, r).await
    })
    .await
    .into_iter()
    .map(|r| match r {
        Ok(settled) => SettleReply {
            settled: Some(settled),
            error: None,
        },
        Err(e) => SettleReply {
            settled: None,
            error: Some(e.message),
        },
    })
    .collect()
}
