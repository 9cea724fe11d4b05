//! How far a walk over every record (`listRecords`, `stats`, `clear()`; see `listing.rs`)
//! may go. A walk SCANs each node until the node answers cursor 0; each reply is bounded,
//! but a server that never answers 0 (the same cursor again and again, or a new one every
//! time), or a proxy in front of it that answers so, would keep the walk going forever.
//! So the walk of one node stops with an error:
//!
//! - at once when the node answers a cursor it already gave on this walk: Redis never
//!   does (a walk visits each bucket once, so its cursors never repeat), and a walk that
//!   followed it would go round for ever;
//! - after more steps than the node's size can take: each SCAN step of Redis covers at
//!   least `COUNT` keys (500) or ten times as many buckets, so a node of `n` keys
//!   (DBSIZE) is walked in well under `n / 250` steps; the walk allows `BASE_STEPS` plus
//!   one step per `KEYS_PER_STEP` keys, and reads DBSIZE only when it gets there (again
//!   each time, the node may have grown), never more than `MAX_STEPS` on a node whatever
//!   DBSIZE says.
//!
//! What a walk holds is bounded too (`Held`): the records it keeps for a listing (and
//! the keys it has seen, to skip a key SCAN lists twice), never more than `MAX_RECORDS`
//! records or `MAX_HELD_BYTES` bytes. Keys that are not this store's records are not kept.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

/// SCAN steps a walk takes on any node, whatever its size.
pub const BASE_STEPS: u64 = 10_000;
/// Beyond `BASE_STEPS`, one step per this many keys the node holds (DBSIZE): five times
/// what Redis needs.
pub const KEYS_PER_STEP: u64 = 50;
/// The most steps a walk takes on one node, whatever DBSIZE says (a node of about 100
/// million keys by the rule above; Redis walks a billion in fewer).
pub const MAX_STEPS: u64 = 1 << 21;
/// The most records a walk holds.
pub const MAX_RECORDS: usize = 1 << 22;
/// The most bytes of records (keys included) a walk holds.
pub const MAX_HELD_BYTES: usize = 1 << 30;

/// What a walk may do after a step.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Go,
    /// Past the steps the node's size allows: read its size (DBSIZE) and ask `sized`.
    AskSize,
    /// Stop, with the reason.
    Stop(String),
}

/// The walk of one node: the cursors it was given, its steps, and the largest size the
/// node reported.
#[derive(Default)]
pub struct NodeWalk {
    cursors: HashSet<u64>,
    steps: u64,
    size: Option<u64>,
}

impl NodeWalk {
    fn allowed_steps(&self) -> u64 {
        BASE_STEPS
            .saturating_add(self.size.unwrap_or(0) / KEYS_PER_STEP)
            .min(MAX_STEPS)
    }

    /// One SCAN step done, the node having answered cursor `next`.
    pub fn step(&mut self, next: u64) -> Verdict {
        self.steps += 1;
        if next != 0 && !self.cursors.insert(next) {
            return Verdict::Stop(format!(
                "the server's SCAN repeated a cursor ({next}) after {} steps{BROKEN}",
                self.steps
            ));
        }
        if self.steps > self.allowed_steps() {
            Verdict::AskSize
        } else {
            Verdict::Go
        }
    }

    /// After `AskSize`: the node's size as it reports it now (`None`: DBSIZE did not say).
    /// `Err` with the reason when the steps are still past what that size allows.
    pub fn sized(&mut self, size: Option<u64>) -> Result<(), String> {
        self.size = self.size.max(size);
        if self.steps <= self.allowed_steps() {
            return Ok(());
        }
        let needs = match self.size {
            _ if self.allowed_steps() == MAX_STEPS => {
                format!("the most a walk takes on one node ({MAX_STEPS})")
            }
            Some(n) => format!("more than a database of {n} keys (DBSIZE) needs"),
            None => "and DBSIZE did not say how many keys the database holds".to_string(),
        };
        Err(format!(
            "the server's SCAN went on for {} steps without finishing, {needs}{BROKEN}",
            self.steps
        ))
    }
}

/// What the walk's errors say about their cause.
const BROKEN: &str = ": a broken or hostile server, or a proxy in front of it, would keep \
    this walk over every record going forever, so it stopped. Check what answers at this \
    address";

/// The records (or, for `stats`, only the keys) a walk holds, each once.
///
/// A key is remembered by a 128-bit digest (two SipHashes under this walk's own random
/// keys), not as a string: at a million records the strings were a million allocations
/// and most of the walk's memory. Two keys of one walk share a digest with a chance of
/// about 1 in 10^26.
#[derive(Default)]
pub struct Held {
    digests: HashSet<u128>,
    hashers: (RandomState, RandomState),
    bytes: usize,
}

impl Held {
    /// Takes the record of `key` (`bytes` its size as held): `Ok(false)` when the walk
    /// already holds it (SCAN may list a key twice), `Err` past the bounds.
    pub fn take(&mut self, key: &str, bytes: usize) -> Result<bool, String> {
        let digest = (u128::from(self.hashers.0.hash_one(key)) << 64)
            | u128::from(self.hashers.1.hash_one(key));
        if self.digests.contains(&digest) {
            return Ok(false);
        }
        self.bytes = self.bytes.saturating_add(bytes + key.len());
        if self.digests.len() >= MAX_RECORDS || self.bytes > MAX_HELD_BYTES {
            return Err(format!(
                "the records read so far are more than a walk over every record holds \
                 ({MAX_RECORDS} records, {} MiB): too many to read at once. A broken or \
                 hostile server, or a proxy in front of it, can answer so; a store this \
                 large is read in parts by clear() and by its own expiry",
                MAX_HELD_BYTES >> 20
            ));
        }
        self.digests.insert(digest);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_cursor_stops_the_walk_at_once() {
        let mut w = NodeWalk::default();
        assert_eq!(w.step(17), Verdict::Go);
        let Verdict::Stop(why) = w.step(17) else {
            panic!("went on")
        };
        assert!(
            why.contains("SCAN repeated a cursor (17) after 2 steps"),
            "{why}"
        );
        // Any earlier cursor, not only the last one.
        let mut w = NodeWalk::default();
        for c in [5, 9, 3] {
            assert_eq!(w.step(c), Verdict::Go);
        }
        assert!(matches!(w.step(9), Verdict::Stop(_)));
    }

    #[test]
    fn cursor_zero_ends_a_node_and_is_no_repeat() {
        let mut w = NodeWalk::default();
        assert_eq!(w.step(0), Verdict::Go);
        // A cluster's next node starts its own walk: its cursors may be the same numbers.
        let mut next = NodeWalk::default();
        assert_eq!(next.step(4), Verdict::Go);
    }

    #[test]
    fn steps_past_the_base_ask_the_size_and_stop_when_it_does_not_allow_them() {
        let mut w = NodeWalk::default();
        for c in 1..=BASE_STEPS {
            assert_eq!(w.step(c), Verdict::Go);
        }
        assert_eq!(w.step(BASE_STEPS + 1), Verdict::AskSize);
        let why = w.sized(Some(0)).unwrap_err();
        assert!(
            why.contains(
                "went on for 10001 steps without finishing, more than a database of 0 keys"
            ),
            "{why}"
        );
        let why = NodeWalk {
            steps: BASE_STEPS + 1,
            ..Default::default()
        }
        .sized(None)
        .unwrap_err();
        assert!(why.contains("DBSIZE did not say"), "{why}");
    }

    #[test]
    fn a_large_node_allows_more_steps_and_a_growing_one_is_asked_again() {
        let mut w = NodeWalk::default();
        for c in 1..=BASE_STEPS {
            w.step(c);
        }
        assert_eq!(w.step(BASE_STEPS + 1), Verdict::AskSize);
        // 1,000,000 keys: 20,000 more steps.
        assert_eq!(w.sized(Some(1_000_000)), Ok(()));
        let mut c = BASE_STEPS + 1;
        while w.step(c + 1) == Verdict::Go {
            c += 1;
        }
        assert_eq!(w.steps, BASE_STEPS + 20_001);
        // It grew meanwhile: on it goes. A smaller size than the largest read does not shrink it.
        assert_eq!(w.sized(Some(2_000_000)), Ok(()));
        assert_eq!(w.sized(Some(10)), Ok(()));
    }

    #[test]
    fn no_size_takes_a_node_past_max_steps() {
        let mut w = NodeWalk {
            steps: MAX_STEPS,
            ..Default::default()
        };
        assert_eq!(w.step(1), Verdict::AskSize);
        let why = w.sized(Some(u64::MAX)).unwrap_err();
        assert!(why.contains("the most a walk takes on one node"), "{why}");
    }

    #[test]
    fn held_records_are_each_taken_once_and_bounded() {
        let mut h = Held::default();
        assert_eq!(h.take("a", 10), Ok(true));
        assert_eq!(h.take("a", 10), Ok(false));
        assert_eq!(h.take("b", MAX_HELD_BYTES - 13), Ok(true));
        let why = h.take("c", 1).unwrap_err();
        assert!(why.contains("too many to read at once"), "{why}");
    }
}
