//! The claim rule: what `acquire` does with the record it finds. SQLite applies it in
//! Rust inside one write transaction; Redis applies the same table in its Lua script.
//!
//! | found                                   | decision                              |
//! |-----------------------------------------|---------------------------------------|
//! | nothing, or expired past `ttlMs`        | claim, attempts = 1                   |
//! | `failed`                                | claim, attempts + 1                   |
//! | `pending`/`completed`, other fingerprint| refuse (the caller reports a mismatch)|
//! | `completed`                             | refuse (the caller replays it)        |
//! | `pending`, lease expired                | claim (take over), attempts + 1       |
//! | `pending`, lease alive, `force`         | claim (retry now), attempts + 1       |
//! | `pending`, lease alive                  | refuse (in flight)                    |

use napi_derive::napi;

use crate::clock::Now;
use crate::record::{NativeRecord, Record, COMPLETED, FAILED, PENDING};

#[napi(object)]
#[derive(Clone, Debug)]
pub struct AcquireRequest {
    pub key: String,
    pub name: String,
    pub fingerprint: String,
    pub lease_ms: f64,
    pub ttl_ms: Option<f64>,
    /// `onDuplicate: 'retry'`: claim even a pending record whose lease is alive.
    pub force: bool,
    /// JSON text of where the call came from (scope, tool call id, ...), kept as given.
    pub meta: Option<String>,
}

#[napi(object)]
#[derive(Clone, Debug)]
pub struct AcquireOutcome {
    pub acquired: bool,
    /// The fencing token of the new claim; `complete`, `fail` and `renew` need it.
    pub token: Option<String>,
    pub attempts: u32,
    /// The claim replaced a pending record whose owner's lease had run out.
    pub taken_over: bool,
    /// When not acquired: the record that stood in the way.
    pub record: Option<NativeRecord>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    Claim {
        attempts: u32,
        taken_over: bool,
        fresh: bool,
    },
    Refuse,
}

pub fn decide(found: Option<&Record>, fingerprint: &str, force: bool, now: &Now) -> Decision {
    let fresh = Decision::Claim {
        attempts: 1,
        taken_over: false,
        fresh: true,
    };
    let Some(r) = found else { return fresh };
    if r.expired(now) {
        return fresh;
    }
    let again = |taken_over| Decision::Claim {
        attempts: r.attempts + 1,
        taken_over,
        fresh: false,
    };
    if r.status == FAILED {
        return again(false);
    }
    if r.fingerprint != fingerprint || r.status == COMPLETED {
        return Decision::Refuse;
    }
    debug_assert_eq!(r.status, PENDING);
    if !r.lease_alive(now) {
        again(true)
    } else if force {
        again(false)
    } else {
        Decision::Refuse
    }
}

/// Milliseconds from JavaScript (already validated there) as whole milliseconds.
pub fn whole_ms(ms: f64) -> i64 {
    if ms.is_finite() && ms > 0.0 {
        ms.ceil().min(i64::MAX as f64 / 2.0) as i64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: &str, lease_left: i64, expires_in: Option<i64>) -> Record {
        Record {
            key: "k".into(),
            name: "n".into(),
            fingerprint: "fp".into(),
            status: status.into(),
            token: Some("t".into()),
            result: None,
            error: None,
            attempts: 3,
            created_at: 0,
            updated_at: 0,
            expires_at: expires_in.map(|d| 1000 + d),
            lease_expires_at: Some(1000 + lease_left),
            ..Record::default()
        }
    }

    #[test]
    fn nothing_found_is_claimed_fresh() {
        assert_eq!(
            decide(None, "fp", false, &1000.into()),
            Decision::Claim {
                attempts: 1,
                taken_over: false,
                fresh: true
            }
        );
    }

    #[test]
    fn completed_is_refused_and_failed_is_claimed() {
        assert_eq!(
            decide(Some(&record(COMPLETED, 0, None)), "fp", true, &1000.into()),
            Decision::Refuse
        );
        assert_eq!(
            decide(Some(&record(FAILED, 0, None)), "other", false, &1000.into()),
            Decision::Claim {
                attempts: 4,
                taken_over: false,
                fresh: false
            }
        );
    }

    #[test]
    fn pending_depends_on_lease_and_force() {
        let live = record(PENDING, 10, None);
        assert_eq!(
            decide(Some(&live), "fp", false, &1000.into()),
            Decision::Refuse
        );
        assert_eq!(
            decide(Some(&live), "fp", true, &1000.into()),
            Decision::Claim {
                attempts: 4,
                taken_over: false,
                fresh: false
            }
        );
        let dead = record(PENDING, 0, None);
        assert_eq!(
            decide(Some(&dead), "fp", false, &1000.into()),
            Decision::Claim {
                attempts: 4,
                taken_over: true,
                fresh: false
            }
        );
    }

    #[test]
    fn other_fingerprint_is_refused_even_when_the_lease_is_dead() {
        assert_eq!(
            decide(
                Some(&record(PENDING, 0, None)),
                "other",
                false,
                &1000.into()
            ),
            Decision::Refuse
        );
        assert_eq!(
            decide(
                Some(&record(COMPLETED, 0, None)),
                "other",
                false,
                &1000.into()
            ),
            Decision::Refuse
        );
    }

    #[test]
    fn expiry_frees_settled_records_but_not_live_leases() {
        assert_eq!(
            decide(
                Some(&record(COMPLETED, 0, Some(0))),
                "other",
                false,
                &1000.into()
            ),
            Decision::Claim {
                attempts: 1,
                taken_over: false,
                fresh: true
            }
        );
        assert_eq!(
            decide(
                Some(&record(PENDING, 10, Some(-5))),
                "fp",
                false,
                &1000.into()
            ),
            Decision::Refuse
        );
    }

    #[test]
    fn a_pending_record_never_expires_its_dead_owner_is_taken_over() {
        // Past an expires_at (records of older versions carry one while pending) with its
        // lease dead: a takeover that counts the attempt (reconcile is asked), never fresh.
        assert_eq!(
            decide(
                Some(&record(PENDING, 0, Some(-5))),
                "fp",
                false,
                &1000.into()
            ),
            Decision::Claim {
                attempts: 4,
                taken_over: true,
                fresh: false
            }
        );
        assert!(!record(PENDING, 0, Some(-5)).expired(1000));
        assert!(record(FAILED, 0, Some(-5)).expired(1000));
    }
}
