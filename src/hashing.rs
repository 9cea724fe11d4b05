//! Key and fingerprint derivation.
//!
//! The TypeScript layer turns arguments into canonical JSON (sorted keys, strict value
//! rules) because only it can walk a JavaScript value faithfully (`toJSON`, getters,
//! proxies); this module hashes that text. Every field is length-prefixed and the two
//! hashes are domain-separated, so no two different inputs can share a preimage.

use napi_derive::napi;
use sha2::{Digest, Sha256};

const KEY_DOMAIN: &[u8] = b"idempotent-tools/key/v1";
const FINGERPRINT_DOMAIN: &[u8] = b"idempotent-tools/fingerprint/v1";

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // Bytes, then one check that they are text: pushing chars encodes each as UTF-8, and
    // every call, replays included, writes two digests.
    let mut out = Vec::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize]);
        out.push(DIGITS[(b & 15) as usize]);
    }
    String::from_utf8(out).expect("hex digits are ASCII")
}

fn field(h: &mut Sha256, value: Option<&str>) {
    match value {
        None => h.update([0u8]),
        Some(text) => {
            h.update([1u8]);
            h.update((text.len() as u64).to_be_bytes());
            h.update(text.as_bytes());
        }
    }
}

/// SHA-256 (hex) of the function's name and the canonical JSON of what identifies the
/// call. `payload` is `None` when the arguments cannot be encoded (an explicit key was
/// given for arguments that are not data): the fingerprint then covers the name only.
pub fn fingerprint_of(name: &str, payload: Option<&str>) -> String {
    let mut h = Sha256::new();
    h.update(FINGERPRINT_DOMAIN);
    field(&mut h, Some(name));
    field(&mut h, payload);
    hex(&h.finalize())
}

/// The derived key: SHA-256 (hex) over the name, the context (if any) and the payload.
pub fn derived_key(name: &str, context: Option<&str>, payload: &str) -> String {
    let mut h = Sha256::new();
    h.update(KEY_DOMAIN);
    field(&mut h, Some(name));
    field(&mut h, context);
    field(&mut h, Some(payload));
    hex(&h.finalize())
}

/// The fingerprint (64 hex digits) followed by the derived key (64 more), in one string:
/// one crossing of the napi boundary and no array to build.
#[napi(catch_unwind)]
pub fn call_hashes(name: String, context: Option<String>, payload: String) -> String {
    let mut both = fingerprint_of(&name, Some(&payload));
    both.push_str(&derived_key(&name, context.as_deref(), &payload));
    both
}

/// The fingerprint of a call under an explicit key.
#[napi(catch_unwind)]
pub fn fingerprint(name: String, payload: Option<String>) -> String {
    fingerprint_of(&name, payload.as_deref())
}

/// HMAC-SHA256 (RFC 2104) of `message` under `secret`. Written out here rather than taken
/// from a crate: it is the two SHA-256 passes below, over the `sha2` we already use.
fn hmac_sha256(secret: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block_key = [0u8; BLOCK];
    if secret.len() > BLOCK {
        block_key[..32].copy_from_slice(&Sha256::digest(secret));
    } else {
        block_key[..secret.len()].copy_from_slice(secret);
    }
    let mut inner = Sha256::new();
    inner.update(block_key.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(block_key.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The keyed id of a record's key: what events, traces and logs carry instead of a derived
/// key. A derived key is an unsalted hash of the arguments, so a low-entropy argument (the
/// last four digits of an SSN) can be recovered from it by hashing every guess; the keyed
/// id needs the store's secret for that. 24 hex digits (96 bits) name a record among any
/// store's records; the CLI and the inspector page resolve them.
pub fn key_id_of(secret: &str, key: &str) -> String {
    hex(&hmac_sha256(secret.as_bytes(), key.as_bytes())[..12])
}

/// See `key_id_of`.
#[napi(catch_unwind)]
pub fn key_id(secret: String, key: String) -> String {
    key_id_of(&secret, &key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector_is_stable() {
        // Changing this value changes every stored key: that needs a schema migration.
        let key = derived_key("charge", None, r#"["order-42",19.99]"#);
        assert_eq!(key.len(), 64);
        assert_eq!(key, derived_key("charge", None, r#"["order-42",19.99]"#));
    }

    #[test]
    fn fields_do_not_run_together() {
        assert_ne!(
            derived_key("ab", Some("c"), "[]"),
            derived_key("a", Some("bc"), "[]")
        );
        assert_ne!(
            derived_key("a", None, "[]"),
            derived_key("a", Some(""), "[]")
        );
        assert_ne!(fingerprint_of("a", None), fingerprint_of("a", Some("")));
    }

    #[test]
    fn key_and_fingerprint_are_domain_separated() {
        assert_ne!(
            derived_key("a", None, "[1]"),
            fingerprint_of("a", Some("[1]"))
        );
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // RFC 4231, test cases 2 and 6 (a key longer than the block).
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn key_ids_depend_on_the_secret() {
        let key = derived_key("check", None, r#"["1234"]"#);
        assert_eq!(key_id_of("s1", &key).len(), 24);
        assert_eq!(key_id_of("s1", &key), key_id_of("s1", &key));
        assert_ne!(key_id_of("s1", &key), key_id_of("s2", &key));
    }

    #[test]
    fn hex_encodes() {
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }
}
