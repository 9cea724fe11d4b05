//! The store's calls on the JavaScript thread's own event loop: the acquires, completes,
//! fails and renews of one turn (`runBatch`, see `ops.rs`) go out as one pipeline on a
//! connection that libuv drives (`conn.rs`), and their promise is settled in the loop's
//! poll phase, as a `net.Socket`'s callbacks run. The Tokio transport costs every round
//! trip two cross-thread wake-ups (the JavaScript thread waking the Tokio worker, the
//! worker waking it back) and a Tokio task, which measured most of a call's CPU and, one
//! call at a time, most of its latency (bench/RESULTS.md).
//!
//! Used for a plain `redis://` (or `valkey://`) server under Node.js, on Unix (elsewhere
//! `unsupported.rs` stands in); TLS, a Cluster, and hosts without Node's libuv keep the
//! Tokio transport, which also serves every other call (`get`, listings, `clear`,
//! `release`). The decisions are the same code either way (the helpers of the store's
//! `Inner`): only the transport differs.

mod conn;
mod js;
mod one_command;
mod resp;
pub mod uv;

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use redis::{Script, Value};

use super::connection::Target;
use super::eviction::{self, EvictionPolicy};
use super::ops::{Op, OpReply};
use super::{claim_args, record, renew_args, scripts, settle_args, settle_what, Inner};
use crate::failure::StoreResult;
use crate::record::{SettleRequest, COMPLETED};
use crate::token::new_token;
use conn::{Conn, Settings, Shared};
use js::Deferred;
use one_command::{compare_and_set, OneCommand, OneSettle};

/// The loop transport of one store.
pub struct OnLoop {
    conn: Shared,
    inner: Arc<Inner>,
    one_command: Rc<OneCommand>,
}

/// Whether the store can use this transport: a plain TCP server, not a cluster, on a host
/// whose libuv this process exports.
pub fn available(target: &Target, cluster: bool) -> bool {
    !cluster && matches!(target.info.addr(), redis::ConnectionAddr::Tcp(..)) && uv::uv().is_some()
}

/// One script to run on one record.
struct ScriptCall {
    script: &'static Script,
    key: String,
    /// A staged settle's staging key (a Redis key, prefix included).
    stage: Option<String>,
    args: Vec<Vec<u8>>,
}

impl ScriptCall {
    fn pack(&self, inner: &Inner, out: &mut Vec<u8>) {
        let key = inner.redis_key(&self.key);
        match &self.stage {
            None => scripts::evalsha(self.script, &key, &self.args),
            Some(stage) => scripts::evalsha_keys(self.script, &[&key, stage], &self.args),
        }
        .write_packed_command(out);
    }
}

/// Outcomes longer than this many bytes are staged (see lua/settle_staged.lua). Measured
/// (server CPU per new call, Redis 7.0): direct 14 us with a small result, 28 us at 4 KB,
/// 71 us at 16 KB (Lua copies and collects the outcome, about 3.5 us per KB); staged 24 us
/// at 4 KB and 36 us at 16 KB, but dearer than direct below about 2-3 KB (the staging key's
/// SET, SETRANGE, APPEND and RENAME).
const STAGE_OVER: usize = 3072;

/// A settle's commands: its script, and, for a large outcome, the staging key's SET first.
fn settle_commands(
    inner: &Inner,
    status: &'static str,
    r: &SettleRequest,
    out: &mut Vec<u8>,
) -> (ScriptCall, usize) {
    let outcome = record::outcome_fields(r.result.as_deref(), r.error.as_deref());
    if outcome.len() <= STAGE_OVER {
        let call = ScriptCall {
            script: scripts::settle(),
            key: r.key.clone(),
            stage: None,
            args: settle_args(status, r),
        };
        call.pack(inner, out);
        return (call, 1);
    }
    let stage = format!("{}\0staged:{}", inner.prefix, r.token);
    let mut value = vec![b' '; record::STAGED_HEAD];
    value.extend_from_slice(&outcome);
    redis::cmd("SET")
        .arg(&stage)
        .arg(value)
        .arg("PX")
        .arg(STAGE_PX)
        .write_packed_command(out);
    let code = if status == COMPLETED { "c" } else { "f" };
    let call = ScriptCall {
        script: scripts::settle_staged(),
        key: r.key.clone(),
        stage: Some(stage),
        args: vec![
            r.token.as_bytes().to_vec(),
            code.as_bytes().to_vec(),
            r.ttl_ms
                .map(|t| super::ms_arg(t).to_string().into_bytes())
                .unwrap_or_default(),
            r.duration_ms
                .map(|d| (d.max(0.0).round() as i64).to_string().into_bytes())
                .unwrap_or_default(),
            record::STAGED_HEAD.to_string().into_bytes(),
        ],
    };
    call.pack(inner, out);
    (call, 2)
}

/// How long a staged outcome waits for its settle (ms): a settle that never runs (its
/// connection dropped) leaves nothing behind for long.
const STAGE_PX: u64 = 60_000;

const ACQUIRE: &str = "Redis acquire failed";
const RENEW: &str = "Redis renew failed";

fn what(op: &Op) -> &'static str {
    match op {
        Op::Acquire(_) => ACQUIRE,
        Op::Settle(status, _) => settle_what(status),
        Op::Renew { .. } => RENEW,
    }
}

impl OnLoop {
    /// On the JavaScript thread, inside a napi call.
    pub fn new(env: &Env, inner: Arc<Inner>) -> napi::Result<OnLoop> {
        let uv = uv::uv().ok_or_else(|| napi::Error::from_reason("libuv is not available"))?;
        let target = &inner.conn.target;
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
        let conn = Conn::new(uv, env.raw(), settings)?;
        // When Node's environment goes away (a worker thread ends), the connection's
        // handles must close with it, and no promise may be settled any more.
        let weak = std::rc::Rc::downgrade(&conn);
        env.add_env_cleanup_hook(weak, |weak| {
            js::env_going();
            if let Some(conn) = weak.upgrade() {
                Conn::close(&conn);
            }
        })?;
        Ok(OnLoop {
            conn,
            inner,
            one_command: Rc::new(OneCommand::new()),
        })
    }

    #[cfg_attr(test, allow(dead_code))]
    pub fn close(&self) {
        Conn::close(&self.conn);
    }

    /// `INFO memory` on this transport's connection (see `eviction`): the eviction check
    /// opens no second connection. Any failure answers null (the calls report outages).
    pub fn eviction_policy<'env>(
        &self,
        env: &'env Env,
    ) -> napi::Result<PromiseRaw<'env, Option<EvictionPolicy>>> {
        let (deferred, promise) = Deferred::new(env.raw())?;
        let mut packed = Vec::new();
        eviction::info_memory().write_packed_command(&mut packed);
        Conn::send(
            &self.conn,
            packed,
            1,
            Box::new(move |_conn, outcome| {
                let policy = outcome
                    .ok()
                    .and_then(|replies| replies.into_iter().next())
                    .as_ref()
                    .and_then(eviction::from_reply);
                deferred.settle(Ok(policy));
            }),
        );
        Ok(PromiseRaw::new(env.raw(), promise))
    }

    /// Every op of one turn in one pipeline: an acquire's `SET NX GET`, a settle's one
    /// command (`one_command.rs`) or its script, a renewal's script (and `TIME` first when
    /// the server's clock is to be read). Then, in one more pipeline, the claim scripts of
    /// the acquires that found a record in the way that is not completed, the settle
    /// scripts of the one-command settles that did not land, and the scripts the server
    /// did not have (loaded first).
    pub fn run_batch<'env>(
        &self,
        env: &'env Env,
        ops: Vec<Op>,
    ) -> napi::Result<PromiseRaw<'env, Vec<OpReply>>> {
        let (deferred, promise) = Deferred::new(env.raw())?;
        let inner = self.inner.clone();
        let one = self.one_command.clone();
        let tokens: Vec<Option<String>> = ops
            .iter()
            .map(|op| matches!(op, Op::Acquire(_)).then(new_token))
            .collect();
        let mut packed = Vec::new();
        // Where the server has no IFEQ, the turn's compare-and-set settles: one script
        // call, sent ahead of the rest (its reply read first).
        let mut compares: Vec<(String, [Vec<u8>; 3])> = Vec::new();
        // What each op sent: its script (none for an acquire; for a one-command settle,
        // the script to send if it does not land), how many replies it waits for, and an
        // acquire's claim value.
        let mut sent: Vec<Sent> = Vec::with_capacity(ops.len());
        for (op, token) in ops.iter().zip(&tokens) {
            sent.push(match op {
                Op::Acquire(r) => {
                    let value = Inner::claim_value(r, token.as_deref().unwrap_or_default());
                    inner
                        .claim_command_with(r, &value)
                        .write_packed_command(&mut packed);
                    Sent::Claim(value)
                }
                Op::Settle(status, r) => match one.settle(&inner.redis_key(&r.key), status, r) {
                    Some(OneSettle::Command(cmd)) => {
                        cmd.write_packed_command(&mut packed);
                        Sent::OneCommand(settle_script(status, r))
                    }
                    Some(OneSettle::Compare { key, args }) => {
                        compares.push((key, args));
                        Sent::Compared(settle_script(status, r), compares.len() - 1)
                    }
                    None => {
                        let (call, count) = settle_commands(&inner, status, r, &mut packed);
                        Sent::Script(call, count)
                    }
                },
                op => {
                    if let Op::Renew { token, .. } = op {
                        one.renewed(token);
                    }
                    let call = renew_script(op);
                    call.pack(&inner, &mut packed);
                    Sent::Script(call, 1)
                }
            });
        }
        let clock = one.wants_clock();
        let mut head = Vec::new();
        if clock {
            redis::cmd("TIME").write_packed_command(&mut head);
        }
        let compared = !compares.is_empty();
        if compared {
            compare_and_set(compares).write_packed_command(&mut head);
        }
        head.append(&mut packed);
        let packed = head;
        let n = ops.len();
        let count = sent.iter().map(Sent::replies).sum::<usize>()
            + usize::from(clock)
            + usize::from(compared);
        let sent_at = Instant::now();
        Conn::send(
            &self.conn,
            packed,
            count,
            Box::new(move |conn, outcome| {
                let replies = match outcome {
                    Ok(replies) => replies,
                    Err(cause) => {
                        let failed = ops.iter().map(|op| {
                            OpReply::Failed(inner.conn.target.failure(what(op), &cause).message)
                        });
                        return deferred.settle(Ok(failed.collect::<Vec<_>>()));
                    }
                };
                let mut out: Vec<Option<OpReply>> = Vec::with_capacity(n);
                let mut again: Vec<(usize, ScriptCall)> = Vec::new();
                let mut preload: Vec<&'static Script> = Vec::new();
                let mut replies = replies.into_iter();
                if clock {
                    one.read_clock(&replies.next().unwrap_or(Value::Nil), sent_at);
                }
                // The compare-and-set's reply: one integer per settle, or an error for all
                // of them (NOSCRIPT: the server did not have the script).
                let compare_reply = if compared {
                    replies.next().unwrap_or(Value::Nil)
                } else {
                    Value::Nil
                };
                let compared_reply = |j: usize| match &compare_reply {
                    Value::Array(items) => items.get(j).cloned().unwrap_or(Value::Nil),
                    other => other.clone(),
                };
                for (i, ((op, token), sent)) in ops.iter().zip(&tokens).zip(sent).enumerate() {
                    // A staged settle's first reply answers its SET: the script's decides.
                    let mut reply = Value::Nil;
                    for _ in 0..sent.replies() {
                        reply = replies.next().unwrap_or(Value::Nil);
                    }
                    let (sent, reply) = match sent {
                        Sent::Compared(call, j) => (Sent::OneCommand(call), compared_reply(j)),
                        sent => (sent, reply),
                    };
                    let call = match sent {
                        Sent::OneCommand(_) if one.settled(&reply) => {
                            out.push(Some(OpReply::Flag(true)));
                            continue;
                        }
                        Sent::OneCommand(call) => {
                            // The record moved on, or the server would not: the settle
                            // script decides (after loading the small one, if it was that
                            // the server did not have).
                            let small = scripts::settle_if_equal();
                            if no_script(&reply) && !preload.iter().any(|s| std::ptr::eq(*s, small))
                            {
                                preload.push(small);
                            }
                            out.push(None);
                            again.push((i, call));
                            continue;
                        }
                        Sent::Claim(value) => {
                            let Op::Acquire(r) = op else {
                                unreachable!("only an acquire claims")
                            };
                            let token = token.as_deref().unwrap_or_default();
                            match inner.claim_command_outcome(ACQUIRE, r, token, reply) {
                                Ok(Some(o)) => {
                                    if o.acquired && o.attempts == 1 && !o.taken_over {
                                        one.claimed(token, value);
                                    }
                                    out.push(Some(OpReply::from(Ok(o))))
                                }
                                Ok(None) => {
                                    out.push(None);
                                    again.push((
                                        i,
                                        ScriptCall {
                                            script: scripts::claim(),
                                            key: r.key.clone(),
                                            stage: None,
                                            args: claim_args(r, token),
                                        },
                                    ));
                                }
                                Err(e) => out.push(Some(OpReply::Failed(e.message))),
                            }
                            continue;
                        }
                        Sent::Script(call, _) => call,
                        Sent::Compared(..) => unreachable!("a compared settle is answered above"),
                    };
                    match op {
                        _ if no_script(&reply) => {
                            if !preload.iter().any(|s| std::ptr::eq(*s, call.script)) {
                                preload.push(call.script);
                            }
                            out.push(None);
                            again.push((i, call));
                        }
                        op => out.push(Some(flag_reply(&inner, what(op), reply))),
                    }
                }
                if again.is_empty() {
                    return deferred.settle(Ok(finished(out)));
                }
                let (indices, calls): (Vec<usize>, Vec<ScriptCall>) = again.into_iter().unzip();
                let inner2 = inner.clone();
                run_scripts(
                    conn,
                    &inner,
                    calls,
                    preload,
                    Box::new(move |_, results| {
                        for (i, result) in indices.into_iter().zip(results) {
                            let op = &ops[i];
                            out[i] = Some(match (op, result) {
                                (Op::Acquire(r), result) => {
                                    let token = tokens[i].clone().unwrap_or_default();
                                    OpReply::from(
                                        result
                                            .map_err(|cause| {
                                                inner2.conn.target.failure(ACQUIRE, cause)
                                            })
                                            .and_then(|v| {
                                                inner2.claim_script_outcome(ACQUIRE, r, token, &v)
                                            }),
                                    )
                                }
                                (op, Ok(v)) => flag_reply(&inner2, what(op), v),
                                (op, Err(cause)) => OpReply::Failed(
                                    inner2.conn.target.failure(what(op), cause).message,
                                ),
                            });
                        }
                        deferred.settle(Ok(finished(out)));
                    }),
                );
            }),
        );
        Ok(PromiseRaw::new(env.raw(), promise))
    }
}

/// What one op of a batch sent.
enum Sent {
    /// A `SET NX GET` with this claim value.
    Claim(Vec<u8>),
    /// A settle's one command (`one_command.rs`), and the script that decides when it
    /// does not land.
    OneCommand(ScriptCall),
    /// A script, and how many replies it waits for (a staged settle's SET, then its script).
    Script(ScriptCall, usize),
    /// A settle in the turn's compare-and-set (`settle_if_equal`), at this index of its
    /// reply, and the script that decides when it does not land.
    Compared(ScriptCall, usize),
}

impl Sent {
    fn replies(&self) -> usize {
        match self {
            Sent::Claim(_) | Sent::OneCommand(_) => 1,
            Sent::Script(_, n) => *n,
            Sent::Compared(..) => 0,
        }
    }
}

/// The settle script, outcome and all in its arguments (never staged: it runs only when a
/// one-command settle did not land).
fn settle_script(status: &'static str, r: &SettleRequest) -> ScriptCall {
    ScriptCall {
        script: scripts::settle(),
        key: r.key.clone(),
        stage: None,
        args: settle_args(status, r),
    }
}

/// The script a renewal runs.
fn renew_script(op: &Op) -> ScriptCall {
    match op {
        Op::Renew {
            key,
            token,
            lease_ms,
        } => ScriptCall {
            script: scripts::renew(),
            key: key.clone(),
            stage: None,
            args: renew_args(token.clone(), *lease_ms),
        },
        _ => unreachable!("only a renewal runs the renew script"),
    }
}

/// A settle's or a renewal's answer: 1 or 0, or the failure its error reply stands for.
fn flag_reply(inner: &Inner, what: &str, reply: Value) -> OpReply {
    let flag: StoreResult<bool> = match reply {
        Value::ServerError(e) => Err(inner.server_failure(what, &e)),
        v => inner.flag(what, &v),
    };
    OpReply::from(flag)
}

fn finished(out: Vec<Option<OpReply>>) -> Vec<OpReply> {
    out.into_iter()
        .map(|r| {
            r.unwrap_or_else(|| OpReply::Failed("internal error: an op left unanswered".into()))
        })
        .collect()
}

/// A script call's reply, or the cause of its failure.
type ScriptsDone = Box<dyn FnOnce(&Shared, Vec<Result<Value, String>>)>;

/// Every call in one pipeline, after a SCRIPT LOAD of each script in `preload`; `done`
/// gets each call's reply (an error reply as the cause of its failure). A server that
/// does not know a script answers NOSCRIPT (a script that answered so did not run): it is
/// loaded and those calls are sent again, once, in one more pipeline.
fn run_scripts(
    conn: &Shared,
    inner: &Arc<Inner>,
    calls: Vec<ScriptCall>,
    preload: Vec<&'static Script>,
    done: ScriptsDone,
) {
    let mut load = redis::pipe();
    for s in &preload {
        load.load_script(s);
    }
    let mut packed = load.get_packed_pipeline();
    for c in &calls {
        c.pack(inner, &mut packed);
    }
    let loads = preload.len();
    let inner = inner.clone();
    Conn::send(
        conn,
        packed,
        loads + calls.len(),
        Box::new(move |conn, outcome| {
            let replies: Vec<Value> = match outcome {
                Ok(replies) => replies.into_iter().skip(loads).collect(),
                Err(cause) => {
                    return done(conn, calls.iter().map(|_| Err(cause.clone())).collect())
                }
            };
            let unknown: Vec<usize> = (0..calls.len())
                .filter(|&i| no_script(&replies[i]))
                .collect();
            if unknown.is_empty() || loads > 0 {
                return done(conn, replies.into_iter().map(script_answer).collect());
            }
            let mut again = Vec::new();
            let mut scripts: Vec<&'static Script> = Vec::new();
            for &i in &unknown {
                if !scripts.iter().any(|s| std::ptr::eq(*s, calls[i].script)) {
                    scripts.push(calls[i].script);
                }
                again.push(ScriptCall {
                    script: calls[i].script,
                    key: calls[i].key.clone(),
                    stage: calls[i].stage.clone(),
                    args: calls[i].args.clone(),
                });
            }
            let mut replies: Vec<Option<Value>> = replies.into_iter().map(Some).collect();
            run_scripts(
                conn,
                &inner,
                again,
                scripts,
                Box::new(move |conn, results| {
                    let mut results = results.into_iter();
                    let out = (0..replies.len())
                        .map(|i| {
                            if unknown.contains(&i) {
                                results.next().unwrap_or_else(|| Err("no reply".into()))
                            } else {
                                script_answer(replies[i].take().expect("a reply"))
                            }
                        })
                        .collect();
                    done(conn, out);
                }),
            );
        }),
    );
}

fn no_script(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if e.kind() == Some(redis::ServerErrorKind::NoScript))
}

/// A script call's reply, or the cause of its failure.
fn script_answer(v: Value) -> Result<Value, String> {
    match v {
        v if no_script(&v) => {
            Err("the server does not keep the script (NOSCRIPT after loading it)".into())
        }
        Value::ServerError(e) => Err(super::connection::explain(&e)),
        v => Ok(v),
    }
}
