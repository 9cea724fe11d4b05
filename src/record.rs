//! The record a store keeps per key, and its shape as JavaScript sees it.

use napi_derive::napi;

use crate::clock::Now;

pub const PENDING: &str = "pending";
pub const COMPLETED: &str = "completed";
pub const FAILED: &str = "failed";

/// One key's record. Times are epoch milliseconds. `result` and `error` hold JSON text:
/// the TypeScript layer encodes and parses them, so the core never interprets a result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    pub key: String,
    pub name: String,
    pub fingerprint: String,
    pub status: String,
    /// The current claim's fencing token; `None` once the record is settled.
    pub token: Option<String>,
    /// JSON text of the result; `None` stands for `undefined`.
    pub result: Option<String>,
    /// JSON text `{"name":…,"message":…}` of a failure, or of a result that could not be
    /// stored (then `status` is `completed`).
    pub error: Option<String>,
    pub attempts: u32,
    pub created_at: i64,
    pub updated_at: i64,
    pub expires_at: Option<i64>,
    /// When the lease runs out on the wall clock (Redis: the server's). Shown to users;
    /// it decides the lease only when `lease_until` is absent.
    pub lease_expires_at: Option<i64>,
    /// When the lease runs out on the host's monotonic clock (SQLite, see `clock.rs`).
    pub lease_until: Option<LeaseDeadline>,
    /// The project the record belongs to (SQLite); `None` for stores without one.
    pub namespace: Option<String>,
    /// JSON text of the acquire request's `meta`, stored as given.
    pub meta: Option<String>,
    /// How long the executing call took, in ms, as its settle reported it.
    pub duration_ms: Option<i64>,
}

/// A lease deadline on a monotonic clock: only comparable on the same clock (same host,
/// same boot), so it carries that clock's identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseDeadline {
    pub clock: String,
    pub at: i64,
}

impl Record {
    pub fn lease_alive(&self, now: &Now) -> bool {
        if self.status != PENDING {
            return false;
        }
        match (&self.lease_until, &now.lease) {
            // A deadline on another clock (a boot that is over) has ended with that boot.
            (Some(deadline), Some(clock)) => deadline.clock == clock.id && deadline.at > clock.ms,
            _ => self.lease_expires_at.is_some_and(|t| t > now.wall),
        }
    }

    /// Past its `ttlMs` (counted from its settle), a settled record counts as never seen. A
    /// pending record never expires, whatever its age: its owner may have had its side
    /// effect before it died, so the next call must take it over (and ask `reconcile`),
    /// never claim it as new. Records of older versions may carry an `expires_at` while
    /// pending; it is ignored.
    pub fn expired(&self, now: impl Into<Now>) -> bool {
        let now = now.into();
        self.status != PENDING && self.expires_at.is_some_and(|t| t <= now.wall)
    }
}

/// What `listRecent` asks for (SQLite: see `sqlite/listing.rs`; Postgres: `recent.sql`).
#[napi(object)]
pub struct RecentQuery {
    pub status: Option<String>,
    pub name: Option<String>,
    /// Only records updated at or after this (epoch ms).
    pub updated_since: Option<f64>,
    pub limit: Option<u32>,
    /// Default false: records come without their results.
    pub with_results: Option<bool>,
}

#[napi(object)]
pub struct RecentRecords {
    pub records: Vec<NativeRecord>,
    /// How many matched, before `limit`.
    pub matched: u32,
}

/// A record as `get` and `listRecords` hand it to JavaScript (without the token).
#[napi(object)]
#[derive(Clone, Debug)]
pub struct NativeRecord {
    pub key: String,
    pub name: String,
    pub fingerprint: String,
    pub status: String,
    pub result: Option<String>,
    pub error: Option<String>,
    pub attempts: u32,
    pub created_at: f64,
    pub updated_at: f64,
    pub expires_at: Option<f64>,
    pub lease_expires_at: Option<f64>,
    /// The project the record belongs to; absent for stores without namespaces.
    pub namespace: Option<String>,
    /// JSON text of the call's `meta`, as the claim recorded it.
    pub meta: Option<String>,
    pub duration_ms: Option<f64>,
}

impl From<Record> for NativeRecord {
    fn from(r: Record) -> Self {
        NativeRecord {
            key: r.key,
            name: r.name,
            fingerprint: r.fingerprint,
            status: r.status,
            result: r.result,
            error: r.error,
            attempts: r.attempts,
            created_at: r.created_at as f64,
            updated_at: r.updated_at as f64,
            expires_at: r.expires_at.map(|t| t as f64),
            lease_expires_at: r.lease_expires_at.map(|t| t as f64),
            namespace: r.namespace,
            meta: r.meta,
            duration_ms: r.duration_ms.map(|t| t as f64),
        }
    }
}

/// What a replay needs of a completed record (see `peekReplay`).
#[napi(object)]
pub struct ReplayHit {
    /// JSON text of the result; absent for `undefined`.
    pub result: Option<String>,
    /// JSON text `{"name","message"}` when the result could not be stored.
    pub error: Option<String>,
    pub attempts: u32,
}

/// Counts for `stats`.
#[napi(object)]
#[derive(Clone, Debug, Default)]
pub struct NativeStats {
    pub pending: u32,
    pub completed: u32,
    pub failed: u32,
    pub expired: u32,
    pub oldest_pending_at: Option<f64>,
    /// Bytes the store occupies (file size for SQLite, memory for Redis when known).
    pub size_bytes: Option<f64>,
}

impl NativeStats {
    /// Counts one record (both stores' `stats` walk their records through this).
    pub fn count(&mut self, r: &Record, now: impl Into<Now>) {
        if r.expired(now) {
            self.expired += 1;
            return;
        }
        match r.status.as_str() {
            PENDING => {
                self.pending += 1;
                let at = r.created_at as f64;
                self.oldest_pending_at = Some(self.oldest_pending_at.map_or(at, |o| o.min(at)));
            }
            COMPLETED => self.completed += 1,
            _ => self.failed += 1,
        }
    }
}

/// What `complete` and `fail` store for a claim. `result` and `error` are stored as
/// given, byte for byte: the wrapper's encoder decides what is storable (lone-surrogate
/// escapes, 1000 levels of nesting), and a store that refused text after `fn` ran would
/// leave the record pending, so that the next call runs `fn` again.
#[napi(object)]
#[derive(Clone, Debug)]
pub struct SettleRequest {
    pub key: String,
    pub token: String,
    /// JSON text of the result (`completed` only); absent for `undefined`.
    pub result: Option<String>,
    /// JSON text `{"name","message"}`.
    pub error: Option<String>,
    pub ttl_ms: Option<f64>,
    /// How long the executing call took, in ms (kept with the record).
    pub duration_ms: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::LeaseClock;

    fn pending(wall_deadline: i64, deadline: Option<(&str, i64)>) -> Record {
        Record {
            status: PENDING.into(),
            lease_expires_at: Some(wall_deadline),
            lease_until: deadline.map(|(clock, at)| LeaseDeadline {
                clock: clock.into(),
                at,
            }),
            ..Record::default()
        }
    }

    fn at(wall: i64, clock: &'static str, ms: i64) -> Now {
        Now {
            wall,
            lease: Some(LeaseClock { id: clock, ms }),
        }
    }

    #[test]
    fn a_monotonic_deadline_decides_whatever_the_wall_clock_says() {
        let r = pending(1_000, Some(("boot-1", 500)));
        assert!(
            r.lease_alive(&at(1_000_000, "boot-1", 499)),
            "wall clock stepped forward"
        );
        assert!(
            !r.lease_alive(&at(0, "boot-1", 500)),
            "wall clock stepped back"
        );
    }

    #[test]
    fn a_reboot_ends_every_lease() {
        let r = pending(i64::MAX, Some(("boot-1", i64::MAX)));
        assert!(!r.lease_alive(&at(0, "boot-2", 0)));
    }

    #[test]
    fn without_a_monotonic_deadline_the_wall_clock_decides() {
        let r = pending(1_000, None);
        assert!(r.lease_alive(&at(999, "boot-1", 0)));
        assert!(!r.lease_alive(&at(1_000, "boot-1", 0)));
        // A process without a lease clock falls back to the wall-clock deadline too.
        let m = pending(1_000, Some(("boot-1", 5)));
        assert!(m.lease_alive(&Now::from(999)));
    }

    #[test]
    fn a_settled_record_has_no_lease() {
        let r = Record {
            status: COMPLETED.into(),
            ..pending(i64::MAX, Some(("b", i64::MAX)))
        };
        assert!(!r.lease_alive(&at(0, "b", 0)));
    }
}
