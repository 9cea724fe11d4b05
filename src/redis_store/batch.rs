//! `runBatch` on the Tokio transport (TLS, or a runtime other than Node; see `on_loop`
//! for Node's): every acquire, complete, fail and renew that the JavaScript side issued
//! in one turn of the event loop, answered through one promise.
//!
//! On one server, each kind is one pipeline: one write, one reply to wait for, however
//! many calls it holds (the acquires' `SET NX GET`s, then, in a second pipeline, the
//! claim scripts of the calls whose key was taken by a record that is not completed; the
//! settles' scripts; the renewals'). Each call keeps its own outcome or error: the
//! pipeline reports a server error per command.
//!
//! On a cluster (whose calls do not come in batches; this is for completeness), the
//! acquires run as tasks of their own (the cluster client routes each to its key's
//! primary), so one node's trouble holds up only the calls it owns.

use std::future::Future;
use std::sync::Arc;

use redis::{ServerErrorKind, Value};

use super::ops::{Op, OpReply};
use crate::claim::{AcquireOutcome, AcquireRequest};
use crate::failure::{StoreFailure, StoreResult};
use crate::record::{COMPLETED, FAILED};
use crate::token::new_token;

use super::{claim_args, renew_args, scripts, settle_args, settle_what, Inner};

/// The ops of one `runBatch` on the Tokio transport (TLS, or a runtime other than Node):
/// the acquires pipelined as `acquire` does, the settles and renewals each kind in one
/// pipeline of scripts; the answers in the ops' order.
pub async fn run(inner: Arc<Inner>, ops: Vec<Op>) -> Vec<OpReply> {
    let mut out: Vec<Option<OpReply>> = ops.iter().map(|_| None).collect();
    let acquires: Vec<(usize, AcquireRequest)> = ops
        .iter()
        .enumerate()
        .filter_map(|(i, op)| match op {
            Op::Acquire(r) => Some((i, r.clone())),
            _ => None,
        })
        .collect();
    if !acquires.is_empty() {
        let requests: Vec<AcquireRequest> = acquires.iter().map(|(_, r)| r.clone()).collect();
        let results = if inner.conn.is_cluster() {
            each(&inner, requests, |s, r| async move { s.acquire(r).await }).await
        } else {
            acquire_pipelined(&inner, &requests).await
        };
        for ((i, _), r) in acquires.iter().zip(results) {
            out[*i] = Some(OpReply::from(r));
        }
    }
    let kinds = [
        (settle_what(COMPLETED), scripts::settle()),
        (settle_what(FAILED), scripts::settle()),
        ("Redis renew failed", scripts::renew()),
    ];
    for (what, script) in kinds {
        let mut indices = Vec::new();
        let mut calls: Vec<(&str, Vec<Vec<u8>>)> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let call = match op {
                Op::Settle(status, r) if settle_what(status) == what => {
                    (r.key.as_str(), settle_args(status, r))
                }
                Op::Renew {
                    key,
                    token,
                    lease_ms,
                } if what == "Redis renew failed" => {
                    (key.as_str(), renew_args(token.clone(), *lease_ms))
                }
                _ => continue,
            };
            indices.push(i);
            calls.push(call);
        }
        if calls.is_empty() {
            continue;
        }
        let replies = run_scripts(&inner, what, script, calls).await;
        for (i, reply) in indices.into_iter().zip(replies) {
            out[i] = Some(OpReply::from(reply.and_then(|v| inner.flag(what, &v))));
        }
    }
    out.into_iter()
        .map(|r| {
            r.unwrap_or_else(|| OpReply::Failed("internal error: an op left unanswered".into()))
        })
        .collect()
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
