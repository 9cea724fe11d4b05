//! The store's calls on the JavaScript thread's own event loop: acquire and complete
//! batches, `fail` and `renew` (the calls every wrapped call makes) go out on a
//! connection that libuv drives (`conn.rs`), and their promises are settled in the
//! loop's poll phase, as a `net.Socket`'s would be. The Tokio transport costs every
//! round trip two cross-thread wake-ups (the JavaScript thread waking the Tokio worker,
//! the worker waking it back) and a Tokio task, which measured most of a call's CPU and,
//! one call at a time, most of its latency (bench/RESULTS.md).
//!
//! Used for a plain `redis://` (or `valkey://`) server under Node.js, on Unix (elsewhere
//! `unsupported.rs` stands in); TLS, a Cluster, and hosts without Node's libuv keep the
//! Tokio transport, which also serves
//! every other call (`get`, listings, `clear`, `release`). The decisions are the same
//! code either way (the helpers of the store's `Inner`): only the transport differs.

mod conn;
mod js;
mod resp;
pub mod uv;

use std::sync::Arc;

use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use redis::Value;

use super::batch::{AcquireReply, SettleReply};
use super::connection::Target;
use super::{claim_args, scripts, settle_args, settle_what, Inner};
use crate::claim::{AcquireOutcome, AcquireRequest};
use crate::failure::StoreResult;
use crate::record::{SettleRequest, COMPLETED};
use crate::token::new_token;
use conn::{Conn, Settings, Shared};
use js::Deferred;

/// The loop transport of one store.
pub struct OnLoop {
    conn: Shared,
    inner: Arc<Inner>,
}

/// Whether the store can use this transport: a plain TCP server, not a cluster, on a host
/// whose libuv this process exports.
pub fn available(target: &Target, cluster: bool) -> bool {
    !cluster && matches!(target.info.addr(), redis::ConnectionAddr::Tcp(..)) && uv::uv().is_some()
}

impl OnLoop {
    /// On the JavaScript thread, inside a napi call.
    pub fn new(env: &Env, inner: Arc<Inner>) -> napi::Result<OnLoop> {
        let uv = uv::uv().ok_or_else(|| napi::Error::from_reason("libuv is not available"))?;
        let target = inner.conn.target.clone();
        let redis::ConnectionAddr::Tcp(host, port) = target.info.addr().clone() else {
            return Err(napi::Error::from_reason("not a plain TCP address"));
        };
        let settings = target.info.redis_settings();
        let (connect, command) = inner.conn.timeouts();
        let settings = Settings {
            host,
            port,
            username: settings.username().map(str::to_string),
            password: settings.password().map(str::to_string),
            db: settings.db(),
            connect_timeout_ms: connect.as_millis() as u64,
            command_timeout_ms: command.as_millis() as u64,
        };
        let conn = Conn::new(uv, env.raw(), target, settings)?;
        // When Node's environment goes away (a worker thread ends), the connection's
        // handles must close with it.
        let weak = std::rc::Rc::downgrade(&conn);
        env.add_env_cleanup_hook(weak, |weak| {
            js::env_going();
            if let Some(conn) = weak.upgrade() {
                Conn::close(&conn);
            }
        })?;
        Ok(OnLoop { conn, inner })
    }

    #[cfg_attr(test, allow(dead_code))]
    pub fn close(&self) {
        Conn::close(&self.conn);
    }

    /// See `batch::acquire`: every `SET NX GET` in one pipeline, then the claim scripts of
    /// the calls those did not answer.
    pub fn acquire_batch<'env>(
        &self,
        env: &'env Env,
        requests: Vec<AcquireRequest>,
    ) -> napi::Result<PromiseRaw<'env, Vec<AcquireReply>>> {
        const WHAT: &str = "Redis acquire failed";
        let (deferred, promise) = Deferred::new(env.raw())?;
        let inner = self.inner.clone();
        let tokens: Vec<String> = requests.iter().map(|_| new_token()).collect();
        let mut packed = Vec::new();
        for (r, token) in requests.iter().zip(&tokens) {
            inner
                .claim_command(r, token)
                .write_packed_command(&mut packed);
        }
        let n = requests.len();
        Conn::send(
            &self.conn,
            WHAT,
            packed,
            n,
            Box::new(move |conn, outcome| {
                let replies = match outcome {
                    Ok(replies) => replies,
                    Err(e) => {
                        let all = requests.iter().map(|_| AcquireReply::from(Err(e.clone())));
                        return deferred.settle(Ok(all.collect::<Vec<_>>()));
                    }
                };
                let mut out: Vec<Option<StoreResult<AcquireOutcome>>> = Vec::with_capacity(n);
                for ((req, token), reply) in requests.iter().zip(&tokens).zip(replies) {
                    out.push(
                        inner
                            .claim_command_outcome(WHAT, req, token, reply)
                            .transpose(),
                    );
                }
                let open: Vec<usize> = (0..n).filter(|&i| out[i].is_none()).collect();
                if open.is_empty() {
                    return deferred.settle(Ok(replies_of(out)));
                }
                let calls = open
                    .iter()
                    .map(|&i| {
                        (
                            requests[i].key.clone(),
                            claim_args(&requests[i], &tokens[i]),
                        )
                    })
                    .collect();
                let inner2 = inner.clone();
                run_scripts(
                    conn,
                    &inner,
                    WHAT,
                    scripts::claim(),
                    calls,
                    Box::new(move |_, results| {
                        for (&i, result) in open.iter().zip(results) {
                            let token = tokens[i].clone();
                            out[i] = Some(result.and_then(|v| {
                                inner2.claim_script_outcome(WHAT, &requests[i], token, &v)
                            }));
                        }
                        deferred.settle(Ok(replies_of(out)));
                    }),
                );
            }),
        );
        Ok(PromiseRaw::new(env.raw(), promise))
    }

    /// Every complete of a batch: the settle script on each, in one pipeline.
    pub fn complete_batch<'env>(
        &self,
        env: &'env Env,
        requests: Vec<SettleRequest>,
    ) -> napi::Result<PromiseRaw<'env, Vec<SettleReply>>> {
        let (deferred, promise) = Deferred::new(env.raw())?;
        let what = settle_what(COMPLETED);
        let calls = requests
            .iter()
            .map(|r| (r.key.clone(), settle_args(COMPLETED, r)))
            .collect();
        let inner = self.inner.clone();
        run_scripts(
            &self.conn,
            &self.inner,
            what,
            scripts::settle(),
            calls,
            Box::new(move |_, results| {
                let replies: Vec<SettleReply> = results
                    .into_iter()
                    .map(|r| SettleReply::from(r.and_then(|v| inner.flag(what, &v))))
                    .collect();
                deferred.settle(Ok(replies));
            }),
        );
        Ok(PromiseRaw::new(env.raw(), promise))
    }

    /// One script that answers 1 or 0 (`fail`, `renew`).
    pub fn flag_script<'env>(
        &self,
        env: &'env Env,
        what: &'static str,
        script: &'static redis::Script,
        key: String,
        args: Vec<Vec<u8>>,
    ) -> napi::Result<PromiseRaw<'env, bool>> {
        let (deferred, promise) = Deferred::new(env.raw())?;
        let inner = self.inner.clone();
        run_scripts(
            &self.conn,
            &self.inner,
            what,
            script,
            vec![(key, args)],
            Box::new(move |_, results| {
                let flag = results
                    .into_iter()
                    .next()
                    .expect("one reply")
                    .and_then(|v| inner.flag(what, &v));
                deferred.settle(flag.map_err(|e| e.message));
            }),
        );
        Ok(PromiseRaw::new(env.raw(), promise))
    }
}

fn replies_of(out: Vec<Option<StoreResult<AcquireOutcome>>>) -> Vec<AcquireReply> {
    out.into_iter()
        .map(|r| AcquireReply::from(r.expect("every request was answered")))
        .collect()
}

type ScriptsDone = Box<dyn FnOnce(&Shared, Vec<StoreResult<Value>>)>;

/// `script` on every `(key, args)` in one pipeline; `done` gets each call's reply (an
/// error reply as that call's failure). A server that does not know the script answers
/// NOSCRIPT (a script that answered so did not run): it is loaded and those calls are
/// sent again, in one more pipeline.
fn run_scripts(
    conn: &Shared,
    inner: &Arc<Inner>,
    what: &'static str,
    script: &'static redis::Script,
    calls: Vec<(String, Vec<Vec<u8>>)>,
    done: ScriptsDone,
) {
    let mut packed = Vec::new();
    for (key, args) in &calls {
        scripts::evalsha(script, &inner.redis_key(key), args).write_packed_command(&mut packed);
    }
    let n = calls.len();
    let inner = inner.clone();
    Conn::send(
        conn,
        what,
        packed,
        n,
        Box::new(move |conn, outcome| {
            let replies = match outcome {
                Ok(replies) => replies,
                Err(e) => return done(conn, calls.iter().map(|_| Err(e.clone())).collect()),
            };
            let unknown: Vec<usize> = (0..n).filter(|&i| no_script(&replies[i])).collect();
            if unknown.is_empty() {
                let results = replies
                    .into_iter()
                    .map(|v| answer(&inner, what, v))
                    .collect();
                return done(conn, results);
            }
            let mut load = redis::pipe();
            load.load_script(script);
            let mut packed = load.get_packed_pipeline();
            for &i in &unknown {
                let (key, args) = &calls[i];
                scripts::evalsha(script, &inner.redis_key(key), args)
                    .write_packed_command(&mut packed);
            }
            let mut replies: Vec<Option<Value>> = replies.into_iter().map(Some).collect();
            Conn::send(
                conn,
                what,
                packed,
                unknown.len() + 1,
                Box::new(move |conn, outcome| {
                    let results = match outcome {
                        Err(e) => replies
                            .into_iter()
                            .enumerate()
                            .map(|(i, v)| match v {
                                Some(v) if !unknown.contains(&i) => answer(&inner, what, v),
                                _ => Err(e.clone()),
                            })
                            .collect(),
                        Ok(again) => {
                            // again[0] answers SCRIPT LOAD; an error there shows in the
                            // EVALSHAs (NOSCRIPT once more).
                            for (&i, v) in unknown.iter().zip(again.into_iter().skip(1)) {
                                replies[i] = Some(v);
                            }
                            replies
                                .into_iter()
                                .map(|v| answer(&inner, what, v.expect("every call answered")))
                                .collect()
                        }
                    };
                    done(conn, results);
                }),
            );
        }),
    );
}

fn no_script(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if e.kind() == Some(redis::ServerErrorKind::NoScript))
}

/// A script's reply, or its error reply as the call's failure.
fn answer(inner: &Inner, what: &str, v: Value) -> StoreResult<Value> {
    match v {
        Value::ServerError(e) if no_script(&Value::ServerError(e.clone())) => {
            Err(inner.conn.target.failure(
                what,
                "the server does not keep the script (NOSCRIPT after loading it)",
            ))
        }
        Value::ServerError(e) => Err(inner.server_failure(what, &e)),
        v => Ok(v),
    }
}
