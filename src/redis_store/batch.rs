//! One crossing for a burst: `acquireBatch` and `completeBatch` take every call that the
//! JavaScript side issued in one turn of the event loop and answer them all through one
//! promise, settled by one callback into JavaScript.
//!
//! On one server, a batch is one pipeline: one write, one reply to wait for, one Tokio
//! task, however many calls it holds (an acquire batch's `SET NX GET`s first, then, in a
//! second pipeline, the claim scripts of the calls whose key was taken by a record that
//! is not completed). Per call, that saves the task,
//! the timer and the trip through the multiplexed connection's queue that a call of its
//! own costs, which is most of the client's time for a replay. Each call keeps its own
//! outcome or error: the pipeline reports a server error per command.
//!
//! On a cluster, a batch's calls run as tasks of their own (the cluster client routes
//! each to its key's primary), so one node's trouble holds up only the calls it owns.

use std::future::Future;
use std::sync::Arc;

use redis::{ServerErrorKind, Value};

pub use crate::batch_reply::{AcquireReply, SettleReply};
use crate::claim::{AcquireOutcome, AcquireRequest};
use crate::failure::{StoreFailure, StoreResult};
use crate::record::{SettleRequest, COMPLETED};
use crate::token::new_token;

use super::{claim_args, scripts, settle_args, settle_what, Inner};

pub async fn acquire(inner: Arc<Inner>, requests: Vec<AcquireRequest>) -> Vec<AcquireReply> {
    let results = if inner.conn.is_cluster() {
        each(&inner, requests, |s, r| async move { s.acquire(r).await }).await
    } else {
        acquire_pipelined(&inner, &requests).await
    };
    results.into_iter().map(AcquireReply::from).collect()
}

pub async fn complete(inner: Arc<Inner>, requests: Vec<SettleRequest>) -> Vec<SettleReply> {
    let results = if inner.conn.is_cluster() {
        each(&inner, requests, |s, r| async move {
            s.settle(COMPLETED, r).await
        })
        .await
    } else {
        complete_pipelined(&inner, &requests).await
    };
    results.into_iter().map(SettleReply::from).collect()
}

/// The acquires of a batch on one server: every `SET NX GET` in one pipeline, then the
/// claim scripts of the calls those did not answer in another.
async fn acquire_pipelined(
    inner: &Inner,
    requests: &[AcquireRequest],
) -> Vec<StoreResult<AcquireOutcome>> {
    const WHAT: &str = "Redis acquire failed";
    let tokens: Vec<String> = requests.iter().map(|_| new_token()).collect();
    let claims = requests
        .iter()
        .zip(&tokens)
        .map(|(r, token)| inner.claim_command(r, token))
        .collect();
    let replies = match pipeline(inner, WHAT, claims).await {
        Ok(replies) => replies,
        Err(e) => return requests.iter().map(|_| Err(e.clone())).collect(),
    };
    let mut out: Vec<Option<StoreResult<AcquireOutcome>>> = Vec::with_capacity(requests.len());
    for ((req, token), reply) in requests.iter().zip(&tokens).zip(replies) {
        out.push(match reply {
            Ok(v) => inner.claim_command_outcome(WHAT, req, token, v).transpose(),
            Err(NoScript) => Some(Err(inner.malformed(WHAT, "NOSCRIPT to a SET"))),
            Err(Failed(e)) => Some(Err(e)),
        });
    }
    let open: Vec<usize> = (0..requests.len()).filter(|&i| out[i].is_none()).collect();
    if !open.is_empty() {
        let calls = open
            .iter()
            .map(|&i| {
                (
                    requests[i].key.as_str(),
                    claim_args(&requests[i], &tokens[i]),
                )
            })
            .collect();
        let replies = run_scripts(inner, WHAT, scripts::claim(), calls).await;
        for (&i, reply) in open.iter().zip(replies) {
            let token = tokens[i].clone();
            out[i] =
                Some(reply.and_then(|v| inner.claim_script_outcome(WHAT, &requests[i], token, &v)));
        }
    }
    out.into_iter()
        .map(|r| r.expect("every request was answered by its SET NX or its claim script"))
        .collect()
}

async fn complete_pipelined(inner: &Inner, requests: &[SettleRequest]) -> Vec<StoreResult<bool>> {
    let what = settle_what(COMPLETED);
    let calls = requests
        .iter()
        .map(|r| (r.key.as_str(), settle_args(COMPLETED, r)))
        .collect();
    run_scripts(inner, what, scripts::settle(), calls)
        .await
        .into_iter()
        .map(|reply| reply.and_then(|v| inner.flag(what, &v)))
        .collect()
}

/// `script` on every `(key, args)` in one pipeline, each call's reply in order. A server
/// that has not seen the script (restarted, or SCRIPT FLUSH) answers NOSCRIPT: the script
/// is loaded and those calls are sent again (a script that answered NOSCRIPT did not run).
async fn run_scripts(
    inner: &Inner,
    what: &str,
    script: &'static redis::Script,
    calls: Vec<(&str, Vec<Vec<u8>>)>,
) -> Vec<StoreResult<Value>> {
    let evalsha =
        |(key, args): &(&str, Vec<Vec<u8>>)| scripts::evalsha(script, &inner.redis_key(key), args);
    let mut replies = match pipeline(inner, what, calls.iter().map(evalsha).collect()).await {
        Ok(replies) => replies,
        Err(e) => return calls.iter().map(|_| Err(e.clone())).collect(),
    };
    let unknown: Vec<usize> = (0..calls.len())
        .filter(|&i| matches!(&replies[i], Err(NoScript)))
        .collect();
    if !unknown.is_empty() {
        let loaded = inner
            .conn
            .run(what, |mut c| async move {
                script.prepare_invoke().load_async(&mut c).await
            })
            .await;
        let again = match loaded {
            Ok(_) => {
                pipeline(
                    inner,
                    what,
                    unknown.iter().map(|&i| evalsha(&calls[i])).collect(),
                )
                .await
            }
            Err(e) => Err(e),
        };
        match again {
            Ok(again) => {
                for (&i, reply) in unknown.iter().zip(again) {
                    replies[i] = reply;
                }
            }
            Err(e) => {
                for &i in &unknown {
                    replies[i] = Err(Failed(e.clone()));
                }
            }
        }
    }
    replies
        .into_iter()
        .map(|reply| match reply {
            Ok(Value::ServerError(e)) => Err(inner.server_failure(what, &e)),
            Ok(v) => Ok(v),
            Err(Failed(e)) => Err(e),
            Err(NoScript) => Err(inner.conn.target.failure(
                what,
                "the server does not keep the script (NOSCRIPT after loading it)",
            )),
        })
        .collect()
}

/// Why one command of a pipeline has no reply.
enum CommandError {
    /// The server does not know the script (it may be loaded and the command resent).
    NoScript,
    Failed(StoreFailure),
}
use CommandError::{Failed, NoScript};

/// `commands` in one pipeline, one round trip: each command's reply or server error, in
/// order (WRONGTYPE as its `Value::ServerError`: the caller decides what it means). Err
/// when the round trip itself failed (no connection, no answer in time).
async fn pipeline(
    inner: &Inner,
    what: &str,
    commands: Vec<redis::Cmd>,
) -> StoreResult<Vec<Result<Value, CommandError>>> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for cmd in commands {
        pipe.add_command(cmd);
    }
    let values: Vec<Value> = inner
        .conn
        .run(what, |mut c| {
            let pipe = &pipe;
            async move { pipe.query_async::<Vec<Value>>(&mut c).await }
        })
        .await?;
    if values.len() != pipe.len() {
        return Err(inner.malformed(
            what,
            format!("{} replies to a pipeline of {}", values.len(), pipe.len()),
        ));
    }
    Ok(values
        .into_iter()
        .map(|v| match v {
            Value::ServerError(e) if e.kind() == Some(ServerErrorKind::NoScript) => Err(NoScript),
            v if super::wrong_type(&v) => Ok(v),
            Value::ServerError(e) => Err(Failed(inner.server_failure(what, &e))),
            v => Ok(v),
        })
        .collect())
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
