//! What `runBatch` carries across napi: every acquire, complete, fail and renew that the
//! JavaScript side issued in one turn of its event loop, as one string, and their answers
//! as one array of plain values. Measured (bench/RESULTS.md), converting a request object
//! field by field (a named-property lookup each, its name interned on every call) and
//! building each answer as an object of named properties were a fifth of the JavaScript
//! thread's work per call; one string in and arrays out cost a fraction of that.
//!
//! The string (built by lib/stores/redis-store.ts), one op after another:
//!
//! ```text
//! a<leaseMs>,<force 0|1>,<|key|>,<|name|>,<|fingerprint|>,<|meta| or -1>;<key><name><fingerprint><meta>
//! c|f<ttlMs or empty>,<durationMs or empty>,<|key|>,<|token|>,<|result| or -1>,<|error| or -1>;<key><token><result><error>
//! r<leaseMs>,<|key|>,<|token|>;<key><token>
//! ```
//!
//! `|s|` is a length in UTF-16 code units (JavaScript's `s.length`), so the JavaScript
//! side measures nothing; -1 stands for absent. The answers, one per op:
//! - an acquire: its token (a string) when claimed fresh (attempt 1, no takeover); else
//!   `[0, token, attempts, takenOver]` when claimed, or `[1, key, name, fingerprint,
//!   status, result, error, attempts, createdAt, updatedAt, expiresAt, leaseExpiresAt,
//!   meta, durationMs]` (the record in the way, absent fields null);
//! - a settle or a renew: `true` or `false`;
//! - a failure of that op alone: `[2, message]`.
//!
//! Each op's fields were checked on the JavaScript side before it joined the string
//! (lib/stores/requests.ts: strings that cross exactly, numbers, lengths that frame), so a
//! call refused for its input never reaches this string, and a string that does not parse
//! is a bug: then the whole batch fails, its framing being lost.

use std::ptr;

use napi::bindgen_prelude::ToNapiValue;
use napi::sys;

use crate::claim::{AcquireOutcome, AcquireRequest};
use crate::failure::StoreResult;
use crate::record::{NativeRecord, SettleRequest, COMPLETED, FAILED};

pub enum Op {
    Acquire(AcquireRequest),
    /// `complete` (COMPLETED) or `fail` (FAILED).
    Settle(&'static str, SettleRequest),
    Renew {
        key: String,
        token: String,
        lease_ms: f64,
    },
}

/// One op's answer.
pub enum OpReply {
    Claimed {
        token: String,
        attempts: u32,
        taken_over: bool,
    },
    Refused(Box<NativeRecord>),
    Flag(bool),
    Failed(String),
}

impl From<StoreResult<AcquireOutcome>> for OpReply {
    fn from(r: StoreResult<AcquireOutcome>) -> Self {
        match r {
            Ok(o) if o.acquired => OpReply::Claimed {
                token: o.token.unwrap_or_default(),
                attempts: o.attempts,
                taken_over: o.taken_over,
            },
            Ok(o) => match o.record {
                Some(r) => OpReply::Refused(Box::new(r)),
                None => {
                    OpReply::Failed("internal error: a refused acquire without a record".into())
                }
            },
            Err(e) => OpReply::Failed(e.message),
        }
    }
}

impl From<StoreResult<bool>> for OpReply {
    fn from(r: StoreResult<bool>) -> Self {
        match r {
            Ok(b) => OpReply::Flag(b),
            Err(e) => OpReply::Failed(e.message),
        }
    }
}

unsafe fn array(env: sys::napi_env, items: Vec<sys::napi_value>) -> napi::Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    napi::check_status!(sys::napi_create_array_with_length(
        env,
        items.len(),
        &mut out
    ))?;
    for (i, v) in items.into_iter().enumerate() {
        napi::check_status!(sys::napi_set_element(env, out, i as u32, v))?;
    }
    Ok(out)
}

impl ToNapiValue for OpReply {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        match val {
            OpReply::Claimed {
                token,
                attempts: 1,
                taken_over: false,
            } => String::to_napi_value(env, token),
            OpReply::Claimed {
                token,
                attempts,
                taken_over,
            } => array(
                env,
                vec![
                    u32::to_napi_value(env, 0)?,
                    String::to_napi_value(env, token)?,
                    u32::to_napi_value(env, attempts)?,
                    bool::to_napi_value(env, taken_over)?,
                ],
            ),
            OpReply::Refused(r) => {
                let r = *r;
                array(
                    env,
                    vec![
                        u32::to_napi_value(env, 1)?,
                        String::to_napi_value(env, r.key)?,
                        String::to_napi_value(env, r.name)?,
                        String::to_napi_value(env, r.fingerprint)?,
                        String::to_napi_value(env, r.status)?,
                        Option::<String>::to_napi_value(env, r.result)?,
                        Option::<String>::to_napi_value(env, r.error)?,
                        u32::to_napi_value(env, r.attempts)?,
                        f64::to_napi_value(env, r.created_at)?,
                        f64::to_napi_value(env, r.updated_at)?,
                        Option::<f64>::to_napi_value(env, r.expires_at)?,
                        Option::<f64>::to_napi_value(env, r.lease_expires_at)?,
                        Option::<String>::to_napi_value(env, r.meta)?,
                        Option::<f64>::to_napi_value(env, r.duration_ms)?,
                    ],
                )
            }
            OpReply::Flag(b) => bool::to_napi_value(env, b),
            OpReply::Failed(message) => array(
                env,
                vec![
                    u32::to_napi_value(env, 2)?,
                    String::to_napi_value(env, message)?,
                ],
            ),
        }
    }
}

/// Reads `ops` (see the module's doc).
pub fn parse(ops: &str) -> Result<Vec<Op>, String> {
    let mut out = Vec::new();
    let mut rest = ops;
    while let Some(kind) = rest.chars().next() {
        let semi = rest
            .find(';')
            .ok_or("an op without the end of its numbers")?;
        let nums: Vec<&str> = rest[1..semi].split(',').collect();
        rest = &rest[semi + 1..];
        let mut take = |len: &str| -> Result<Option<String>, String> {
            let len: i64 = len
                .parse()
                .map_err(|_| format!("a malformed length {len:?}"))?;
            if len < 0 {
                return Ok(None);
            }
            let (field, after) = split_utf16(rest, len as usize)?;
            rest = after;
            Ok(Some(field.to_string()))
        };
        let number = |s: &str| -> Result<Option<f64>, String> {
            if s.is_empty() {
                return Ok(None);
            }
            s.parse()
                .map(Some)
                .map_err(|_| format!("a malformed number {s:?}"))
        };
        let need = |n: usize| -> Result<(), String> {
            if nums.len() == n {
                Ok(())
            } else {
                Err(format!(
                    "an op '{kind}' with {} numbers instead of {n}",
                    nums.len()
                ))
            }
        };
        let op = match kind {
            'a' => {
                need(6)?;
                let key = take(nums[2])?.unwrap_or_default();
                let name = take(nums[3])?.unwrap_or_default();
                let fingerprint = take(nums[4])?.unwrap_or_default();
                let meta = take(nums[5])?;
                Op::Acquire(AcquireRequest {
                    key,
                    name,
                    fingerprint,
                    lease_ms: number(nums[0])?.unwrap_or(0.0),
                    ttl_ms: None,
                    force: nums[1] == "1",
                    meta,
                })
            }
            'c' | 'f' => {
                need(6)?;
                let key = take(nums[2])?.unwrap_or_default();
                let token = take(nums[3])?.unwrap_or_default();
                let result = take(nums[4])?;
                let error = take(nums[5])?;
                let status = if kind == 'c' { COMPLETED } else { FAILED };
                Op::Settle(
                    status,
                    SettleRequest {
                        key,
                        token,
                        result,
                        error,
                        ttl_ms: number(nums[0])?,
                        duration_ms: number(nums[1])?,
                    },
                )
            }
            'r' => {
                need(3)?;
                let key = take(nums[1])?.unwrap_or_default();
                let token = take(nums[2])?.unwrap_or_default();
                Op::Renew {
                    key,
                    token,
                    lease_ms: number(nums[0])?.unwrap_or(0.0),
                }
            }
            other => return Err(format!("an unknown op '{other}'")),
        };
        out.push(op);
    }
    Ok(out)
}

/// The first `units` UTF-16 code units of `s`, and the rest.
fn split_utf16(s: &str, units: usize) -> Result<(&str, &str), String> {
    let bytes = s.as_bytes();
    // ASCII (keys, names, tokens, most JSON): one byte per unit.
    if bytes.len() >= units && bytes[..units].is_ascii() {
        return Ok(s.split_at(units));
    }
    let mut counted = 0;
    for (at, c) in s.char_indices() {
        if counted == units {
            return Ok(s.split_at(at));
        }
        counted += c.len_utf16();
        if counted > units {
            return Err("a length that cuts a character in two".into());
        }
    }
    if counted == units {
        Ok((s, ""))
    } else {
        Err("a field cut short".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_read_by_utf16_lengths() {
        // "é" is one UTF-16 unit (two UTF-8 bytes); "😀" two units (four bytes).
        let key = "k;é,😀";
        let ops = format!(
            "a30000,1,{},6,2,-1;{key}chargefpc,12.5,3,32,4,-1;abc{}nullr500,1,32;z{}",
            key.encode_utf16().count(),
            "t".repeat(32),
            "u".repeat(32),
        );
        let parsed = parse(&ops).unwrap();
        assert_eq!(parsed.len(), 3);
        let Op::Acquire(a) = &parsed[0] else { panic!() };
        assert_eq!(
            (a.key.as_str(), a.name.as_str(), a.fingerprint.as_str()),
            (key, "charge", "fp")
        );
        assert_eq!(
            (a.lease_ms, a.force, a.meta.as_deref()),
            (30000.0, true, None)
        );
        let Op::Settle(status, s) = &parsed[1] else {
            panic!()
        };
        assert_eq!(*status, COMPLETED);
        assert_eq!(
            (s.key.as_str(), s.result.as_deref(), s.error.as_deref()),
            ("abc", Some("null"), None)
        );
        assert_eq!((s.ttl_ms, s.duration_ms), (None, Some(12.5)));
        let Op::Renew {
            key,
            token,
            lease_ms,
        } = &parsed[2]
        else {
            panic!()
        };
        assert_eq!((key.as_str(), token.len(), *lease_ms), ("z", 32, 500.0));
        assert!(parse("a1,0,5,0,0,-1;abc").is_err());
        assert!(parse("x;").is_err());
        assert!(parse("").unwrap().is_empty());
    }
}
