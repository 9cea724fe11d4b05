//! Fencing tokens: unique per claim, across processes and hosts, and never reused after a
//! record is cleared (so a stale owner can never match a later claim on the same key).

use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The token of a claim that an operator released for a takeover (`release`, see
/// `queries::release`): 32 dashes, which no claim can have (a claim's token is hex), so
/// the old owner's renew and settle are refused and no later claim matches it. Redis
/// writes the same (`RELEASED_TOKEN` in `lua/record.lua`).
pub const RELEASED_TOKEN: &str = "--------------------------------";

fn process_seed() -> &'static [u8; 32] {
    static SEED: OnceLock<[u8; 32]> = OnceLock::new();
    SEED.get_or_init(|| {
        let mut seed = [0u8; 32];
        let from_os = std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut seed));
        if from_os.is_err() {
            // No /dev/urandom (not a Unix host): mix the process id, the time and the
            // per-process random keys of the standard library's hasher.
            use std::hash::{BuildHasher, Hasher};
            let mut h = Sha256::new();
            h.update(std::process::id().to_le_bytes());
            h.update(crate::clock::now_ms().to_le_bytes());
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u32(std::process::id());
            h.update(hasher.finish().to_le_bytes());
            seed.copy_from_slice(&h.finalize());
        }
        seed
    })
}

/// A new 128-bit token as 32 hex digits.
pub fn new_token() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut h = Sha256::new();
    h.update(process_seed());
    h.update(n.to_le_bytes());
    let digest = h.finalize();
    crate::hashing::hex(&digest[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_claim_has_the_released_token() {
        assert_eq!(RELEASED_TOKEN.len(), 32);
        assert!(new_token().bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(RELEASED_TOKEN.bytes().all(|b| b == b'-'));
    }

    #[test]
    fn tokens_are_distinct() {
        let a = new_token();
        let b = new_token();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
    }
}
