//! Time. Record times (`createdAt`, `updatedAt`, `ttlMs` expiry) are wall-clock epoch
//! milliseconds. Leases are timed on a clock that no wall-clock step can move (see
//! `Now::lease`).

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock time in epoch milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A reading of a lease clock: its identity (clocks with different ids cannot be
/// compared) and its time in ms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseClock {
    pub id: String,
    pub ms: i64,
}

/// One moment, as the store's decisions need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Now {
    pub wall: i64,
    /// The host's lease clock; `None` where leases are timed on the wall clock.
    pub lease: Option<LeaseClock>,
}

impl Now {
    pub fn current() -> Self {
        Now {
            wall: now_ms(),
            lease: None,
        }
    }
}

/// A moment on the wall clock alone (Redis: the server's TIME).
impl From<i64> for Now {
    fn from(wall: i64) -> Self {
        Now { wall, lease: None }
    }
}

impl From<&Now> for Now {
    fn from(now: &Now) -> Self {
        now.clone()
    }
}
