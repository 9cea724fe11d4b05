//! The one-command settle: where the server has `SET ... IFEQ` (Valkey 8.1+, Redis 8.4+),
//! a new call's settle is `SET key <settled> IFEQ <claim> [PX ttl]`, one plain command,
//! instead of the settle script (EVALSHA running GET, TIME, PEXPIRETIME and SET inside
//! the server, and building the record in Lua: most of a new call's server time,
//! bench/RESULTS.md, issue 30). Where it has not, the same compare-and-set runs as the
//! smallest script that can (`lua/settle_if_equal.lua`: a GET, a comparison, a SET), one
//! call for every such settle of a turn.
//!
//! It keeps the script's guarantee: the value compared is the whole claim this store
//! wrote with `SET NX`, its fencing token included, so the settle lands only while the
//! record is still exactly that claim (not renewed, taken over, released or deleted).
//! Any other answer (nil: the record moved on; an error: another type, or a server
//! without IFEQ) sends the settle script instead, which decides as it always did (a
//! resend of this very settle included). A server that answers IFEQ with a syntax error
//! does not know it: the store uses the small script from then on.
//!
//! The script reads the server's clock for the record's times; a plain SET cannot. So the
//! store keeps the server's clock as it last read it (`TIME`, sent with a batch at most
//! once a minute and read on a quick round trip) advanced by the monotonic clock, and
//! writes the settled record's `created_at` (when the claim was answered) and
//! `updated_at` from it: within a few ms of the server's own. The record's expiry is
//! `PX ttl`, counted by the server itself, so a wrong estimate never shortens it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use super::super::{ms_arg, record, scripts};
use crate::record::{SettleRequest, COMPLETED};

/// How long a reading of the server's clock is used before it is read again.
const CLOCK_FRESH: Duration = Duration::from_secs(60);
/// A reading taken on a slower round trip than this is not used (its error could be half
/// of it).
const CLOCK_ROUND_TRIP: Duration = Duration::from_millis(10);
/// The most claims remembered: a claim that is never settled (its call stopped) is not
/// kept for good; past this many, new claims settle by script.
const MAX_CLAIMS: usize = 65_536;

/// A fresh claim (attempt 1, written by `SET NX`): its value as written, and when it was
/// answered on the server's clock.
struct Claim {
    value: Vec<u8>,
    created_at: i64,
}

/// A settle without the settle script: one `SET ... IFEQ`, or, where the server has no
/// IFEQ, one key's part of the turn's `settle_if_equal` (`compare_and_set`).
pub enum OneSettle {
    Command(Cmd),
    Compare { key: String, args: [Vec<u8>; 3] },
}

/// The one script call settling every `Compare` of a turn (`lua/settle_if_equal.lua`):
/// its reply is one integer per key, in their order. Takes the settles by value: each
/// settled value (its result in it) is moved into the command, not copied.
pub fn compare_and_set(compares: Vec<(String, [Vec<u8>; 3])>) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(scripts::settle_if_equal().get_hash())
        .arg(compares.len());
    let mut args = Vec::with_capacity(compares.len() * 3);
    for (key, parts) in compares {
        cmd.arg(key);
        args.extend(parts);
    }
    for arg in args {
        cmd.arg(arg);
    }
    cmd
}

/// What the one-command settle needs, per store (on the JavaScript thread only).
pub struct OneCommand {
    /// `SET ... IFEQ`; cleared when the server answers it with a syntax error (then
    /// `lua/settle_if_equal.lua`).
    set_ifeq: Cell<bool>,
    /// The server's clock: its reading (ms) and the instant it stands for.
    clock: Cell<Option<(f64, Instant)>>,
    claims: RefCell<HashMap<String, Claim>>,
}

impl OneCommand {
    pub fn new() -> OneCommand {
        OneCommand {
            set_ifeq: Cell::new(true),
            clock: Cell::new(None),
            claims: RefCell::new(HashMap::new()),
        }
    }

    /// Whether a batch should read the server's clock (`TIME` first in its pipeline).
    pub fn wants_clock(&self) -> bool {
        self.clock
            .get()
            .is_none_or(|(_, at)| at.elapsed() > CLOCK_FRESH)
    }

    /// A `TIME` reply, on a batch sent at `sent`.
    pub fn read_clock(&self, reply: &Value, sent: Instant) {
        let round_trip = sent.elapsed();
        if round_trip > CLOCK_ROUND_TRIP {
            return;
        }
        let Value::Array(parts) = reply else { return };
        let number = |v: &Value| match v {
            Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse::<f64>().ok(),
            _ => None,
        };
        if let [secs, micros] = parts.as_slice() {
            if let (Some(s), Some(us)) = (number(secs), number(micros)) {
                self.clock.set(Some((
                    s * 1000.0 + (us / 1000.0).floor(),
                    sent + round_trip / 2,
                )));
            }
        }
    }

    /// The server's clock now (ms), if it has been read.
    fn server_now(&self) -> Option<i64> {
        let (ms, at) = self.clock.get()?;
        Some((ms + at.elapsed().as_secs_f64() * 1000.0).round() as i64)
    }

    /// A claim `SET NX` made (attempt 1, no takeover), answered now.
    pub fn claimed(&self, token: &str, value: Vec<u8>) {
        let Some(created_at) = self.server_now() else {
            return;
        };
        let mut claims = self.claims.borrow_mut();
        if claims.len() < MAX_CLAIMS {
            claims.insert(token.to_string(), Claim { value, created_at });
        }
    }

    /// A renewal (or a hand-back) of `token` rewrites its record: its claim is no longer
    /// the value `SET NX` wrote.
    pub fn renewed(&self, token: &str) {
        self.claims.borrow_mut().remove(token);
    }

    /// The one command settling `r` (`status` COMPLETED or FAILED), when its claim is
    /// known; `None` sends the settle script.
    pub fn settle(&self, redis_key: &str, status: &str, r: &SettleRequest) -> Option<OneSettle> {
        let claim = self.claims.borrow_mut().remove(&r.token)?;
        let now = self.server_now()?;
        let semi = claim.value.iter().position(|&b| b == b';')?;
        let ttl = r.ttl_ms.map(ms_arg);
        let outcome = record::outcome_fields(r.result.as_deref(), r.error.as_deref());
        // As lua/settle.lua writes it: attempts, no lease, created, updated, no lease end,
        // expires, duration; then the claim's fields and the outcome's.
        let mut value = Vec::with_capacity(claim.value.len() + outcome.len() + 48);
        value.extend_from_slice(record::MAGIC);
        value.push(if status == COMPLETED { b'c' } else { b'f' });
        value.extend_from_slice(r.token.as_bytes());
        let expires_at = ttl.map(|t| now + t);
        let expires = expires_at.map(|e| e.to_string()).unwrap_or_default();
        let duration = r
            .duration_ms
            .map(|d| (d.max(0.0).round() as i64).to_string())
            .unwrap_or_default();
        value.extend_from_slice(
            format!("1,,{},{now},,{expires},{duration};", claim.created_at).as_bytes(),
        );
        value.extend_from_slice(&claim.value[semi + 1..]);
        value.extend_from_slice(&outcome);
        if !self.set_ifeq.get() {
            return Some(OneSettle::Compare {
                key: redis_key.to_string(),
                args: [value, claim.value, expires.into_bytes()],
            });
        }
        let mut cmd = redis::cmd("SET");
        cmd.arg(redis_key).arg(value).arg("IFEQ").arg(claim.value);
        // The key expires exactly when its record says (PXAT, not PX): a caller that waits
        // for `expiresAt` must find it gone (conformance: "a record past ttlMs").
        if let Some(at) = expires_at {
            cmd.arg("PXAT").arg(at);
        }
        Some(OneSettle::Command(cmd))
    }

    /// Whether the one command answered that it settled; otherwise the settle script
    /// decides (and a syntax error means the server does not know IFEQ).
    pub fn settled(&self, reply: &Value) -> bool {
        match reply {
            Value::Okay | Value::Int(1) => true,
            Value::SimpleString(s) => s == "OK",
            Value::ServerError(e) if e.details().is_some_and(|d| d.contains("syntax")) => {
                self.set_ifeq.set(false);
                false
            }
            _ => false,
        }
    }
}
