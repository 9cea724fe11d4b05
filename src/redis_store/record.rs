//! A record as Redis keeps it (format 2): one string value per key, so that a new call is
//! claimed by one plain `SET key <claim> NX GET PX <CLAIM_PX>` (which also hands back the
//! record in the way: a replay is that same command), and only a settle, a renewal and
//! a takeover need a script. Format 1 (a hash per record) is read by `legacy.rs`.
//!
//! ```text
//! value  = "idt2" STATUS TOKEN NUMS ";" FIELDS
//! STATUS = "p" pending | "c" completed | "f" failed
//! TOKEN  = 32 characters: the claim's fencing token (pending); the token of the claim
//!          that settled it (settled: a settle resent after a dropped connection is
//!          recognised); 32 "-" once an operator released it (no claim can settle it)
//! NUMS   = attempts "," lease_ms "," created_at "," updated_at "," lease_until ","
//!          expires_at "," duration_ms          (decimal integers; empty = absent)
//! FIELDS = (TAG length ":" bytes)*   TAG: k key, n name, f fingerprint, m meta,
//!          r result, e error, t "1": the claim took over a dead owner's (kept by a settle,
//!          read only while pending)
//!          (any bytes; absent fields are left out; unknown tags are skipped)
//! ```
//!
//! Times come from the server's clock. A claim written by `SET NX` cannot read that clock,
//! so its `created_at`, `updated_at` and `lease_until` are empty and its key carries an
//! expiry `CLAIM_PX` ms after the claim: the claim was made at `PEXPIRETIME - CLAIM_PX`
//! and its lease ends `lease_ms` later. Every script that rewrites a pending record
//! (takeover, renewal, release) writes those times out and drops the expiry, and a settle
//! replaces it with the record's `ttlMs` (or none). So a pending record never expires
//! while it is unresolved: a claim that is never touched again keeps its key for
//! `CLAIM_PX` ms, about 31,700 years.

use crate::record::{Record, COMPLETED, FAILED, PENDING};

/// The first bytes of every format-2 value: what tells a record from another
/// application's string under the prefix.
pub const MAGIC: &[u8] = b"idt2";
/// The expiry of a claim written by `SET NX`, in ms: far enough to never pass (31,700
/// years), small enough that every time stays exact in Lua's and JavaScript's doubles
/// (PEXPIRETIME about 1.0e15, below 2^53).
pub const CLAIM_PX: i64 = 1_000_000_000_000_000;
/// Fencing tokens are 32 characters (`token::new_token`).
pub const TOKEN_LEN: usize = 32;
/// Bytes before NUMS: magic, status, token.
const HEAD_LEN: usize = MAGIC.len() + 1 + TOKEN_LEN;
/// A staged settle's head (lua/settle_staged.lua): magic, status, token and NUMS padded
/// with spaces, then ';', written over this many spaces at the front of the staged value.
pub const STAGED_HEAD: usize = HEAD_LEN + 96;

/// One field of FIELDS.
fn put(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    out.extend_from_slice(bytes.len().to_string().as_bytes());
    out.push(b':');
    out.extend_from_slice(bytes);
}

/// The FIELDS of a new claim: its key (without the prefix: what marks the value as this
/// store's own record), name, fingerprint and meta.
pub fn claim_fields(key: &str, name: &str, fingerprint: &str, meta: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + key.len() + name.len() + fingerprint.len());
    put(&mut out, b'k', key.as_bytes());
    put(&mut out, b'n', name.as_bytes());
    put(&mut out, b'f', fingerprint.as_bytes());
    if let Some(meta) = meta.filter(|m| !m.is_empty()) {
        put(&mut out, b'm', meta.as_bytes());
    }
    out
}

/// The whole value a new call's `SET NX` writes: pending, attempt 1, times derived from
/// the key's expiry.
pub fn claim_value(token: &str, lease_ms: i64, fields: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD_LEN + 24 + fields.len());
    out.extend_from_slice(MAGIC);
    out.push(b'p');
    out.extend_from_slice(token.as_bytes());
    out.extend_from_slice(b"1,");
    out.extend_from_slice(lease_ms.to_string().as_bytes());
    out.extend_from_slice(b",,,,,;");
    out.extend_from_slice(fields);
    out
}

/// The FIELDS a settle appends: the result (absent for `undefined`) and the error.
pub fn outcome_fields(result: Option<&str>, error: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + result.map_or(0, str::len) + error.map_or(0, str::len));
    if let Some(r) = result {
        put(&mut out, b'r', r.as_bytes());
    }
    if let Some(e) = error {
        put(&mut out, b'e', e.as_bytes());
    }
    out
}

/// A format-2 value, decoded: the record and its token.
#[derive(Debug)]
pub struct Decoded {
    pub record: Record,
    /// The claim's token (pending), or the settling claim's (settled); `None` once released.
    pub token: Option<String>,
    /// A pending claim that took over a dead owner's (field `t`): a resent claim of this
    /// token must answer that it took over, so that reconcile is asked.
    pub taken_over: bool,
}

/// Whether `value` is a format-2 value at all (another application's string is not).
pub fn is_record(value: &[u8]) -> bool {
    value.starts_with(MAGIC)
}

/// Whether decoding `value` needs its key's PEXPIRETIME: a pending record (its lease may
/// be counted from the claim) or one whose `created_at` or `updated_at` is empty (a
/// `SET NX` claim). A settled record carries its times: a walk reads it with MGET alone.
pub fn times_from_expiry(value: &[u8]) -> bool {
    if !is_record(value) || value.len() < HEAD_LEN || value[MAGIC.len()] == b'p' {
        return true;
    }
    let rest = &value[HEAD_LEN..];
    let nums = &rest[..rest.iter().position(|&b| b == b';').unwrap_or(rest.len())];
    let mut parts = nums.split(|&b| b == b',').skip(2);
    let empty = |p: Option<&[u8]>| p.is_none_or(|p| p.trim_ascii().is_empty());
    empty(parts.next()) || empty(parts.next())
}

/// Decodes a format-2 value. `pexpiretime` is the key's PEXPIRETIME (negative when it has
/// none): the times a `SET NX` claim leaves empty are derived from it.
pub fn decode(value: &[u8], pexpiretime: i64) -> Result<Decoded, String> {
    if !is_record(value) || value.len() < HEAD_LEN {
        return Err("a value that idempotent-tools did not write".into());
    }
    let status = match value[MAGIC.len()] {
        b'p' => PENDING,
        b'c' => COMPLETED,
        b'f' => FAILED,
        other => return Err(format!("an unknown status '{}'", other as char)),
    };
    let token = std::str::from_utf8(&value[MAGIC.len() + 1..HEAD_LEN])
        .map_err(|_| "a malformed token".to_string())?;
    let token = (!token.starts_with('-')).then(|| token.to_string());
    let rest = &value[HEAD_LEN..];
    let semi = rest
        .iter()
        .position(|&b| b == b';')
        .ok_or("no end of its numbers")?;
    let mut nums = [None::<i64>; 7];
    let mut parts = rest[..semi].split(|&b| b == b',');
    for (i, slot) in nums.iter_mut().enumerate() {
        let part = parts
            .next()
            .ok_or_else(|| format!("{} numbers instead of 7", i))?;
        // A staged settle pads its numbers with spaces.
        let part = part.trim_ascii();
        if !part.is_empty() {
            let n = std::str::from_utf8(part)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or("a malformed number")?;
            *slot = Some(n);
        }
    }
    let [attempts, lease_ms, created_at, updated_at, lease_until, expires_at, duration_ms] = nums;
    let mut record = Record {
        status: status.to_string(),
        attempts: attempts.and_then(|a| u32::try_from(a).ok()).unwrap_or(1),
        expires_at,
        duration_ms,
        ..Record::default()
    };
    // A SET NX claim: claimed at PEXPIRETIME - CLAIM_PX.
    let claimed_at = (pexpiretime > 0).then(|| pexpiretime - CLAIM_PX);
    record.created_at = created_at.or(claimed_at).unwrap_or(0);
    record.updated_at = updated_at.or(claimed_at).unwrap_or(record.created_at);
    if status == PENDING {
        record.lease_expires_at = lease_until.or_else(|| Some(claimed_at? + lease_ms.unwrap_or(0)));
        record.token = token.clone();
    }
    let mut taken_over = false;
    let mut fields = &rest[semi + 1..];
    while !fields.is_empty() {
        let tag = fields[0];
        let colon = fields
            .iter()
            .position(|&b| b == b':')
            .ok_or("a malformed field")?;
        let len: usize = std::str::from_utf8(&fields[1..colon])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("a malformed field length")?;
        let end = colon + 1 + len;
        let bytes = fields.get(colon + 1..end).ok_or("a field cut short")?;
        let text = || {
            String::from_utf8(bytes.to_vec()).map_err(|_| "a field that is not UTF-8".to_string())
        };
        match tag {
            b'k' => record.key = text()?,
            b'n' => record.name = text()?,
            b'f' => record.fingerprint = text()?,
            b'm' => record.meta = Some(text()?).filter(|m| !m.is_empty()),
            b'r' => record.result = Some(text()?),
            b'e' => record.error = Some(text()?),
            b't' => taken_over = status == PENDING,
            // A field of a later version: skipped.
            _ => {}
        }
        fields = &fields[end..];
    }
    Ok(Decoded {
        record,
        token,
        taken_over,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_set_nx_claim_takes_its_times_from_the_keys_expiry() {
        let fields = claim_fields("k:1", "charge", "fp", Some(r#"{"scope":"t"}"#));
        let v = claim_value(TOKEN, 30_000, &fields);
        assert!(v.starts_with(b"idt2p0123456789abcdef0123456789abcdef1,30000,,,,,;k3:k:1"));
        let claimed = 1_800_000_000_000;
        let d = decode(&v, claimed + CLAIM_PX).unwrap();
        let r = d.record;
        assert_eq!(d.token.as_deref(), Some(TOKEN));
        assert_eq!((r.key.as_str(), r.name.as_str()), ("k:1", "charge"));
        assert_eq!(r.fingerprint, "fp");
        assert_eq!(r.meta.as_deref(), Some(r#"{"scope":"t"}"#));
        assert_eq!((r.status.as_str(), r.attempts), (PENDING, 1));
        assert_eq!((r.created_at, r.updated_at), (claimed, claimed));
        assert_eq!(r.lease_expires_at, Some(claimed + 30_000));
        assert_eq!((r.result, r.error, r.expires_at), (None, None, None));
    }

    #[test]
    fn a_walk_reads_the_expiry_only_where_the_times_come_from_it() {
        let fields = claim_fields("k", "charge", "fp", None);
        // A SET NX claim: its times are the key's expiry.
        assert!(times_from_expiry(&claim_value(TOKEN, 30_000, &fields)));
        // Settled, as the settle script and the one-command settle write it: its own times.
        let settled = |nums: &str| {
            let mut v = b"idt2c".to_vec();
            v.extend_from_slice(TOKEN.as_bytes());
            v.extend_from_slice(nums.as_bytes());
            v.extend_from_slice(&fields);
            v
        };
        assert!(!times_from_expiry(&settled("1,,1000,2000,,9000,5;")));
        // A staged settle pads its numbers with spaces.
        assert!(!times_from_expiry(&settled("1,,1000 ,2000  ,,9000,5   ;")));
        // Settled without a time of its own (no writer of ours leaves one out): read it.
        assert!(times_from_expiry(&settled("1,,,2000,,9000,5;")));
        assert!(times_from_expiry(&settled("1,,1000,,,9000,5;")));
        assert!(times_from_expiry(&settled("1,,1000;")));
        // Pending (renewed, taken over) or not a record: decode decides, with the expiry.
        let mut renewed = settled("2,30000,1000,2000,32000,,;");
        renewed[MAGIC.len()] = b'p';
        assert!(times_from_expiry(&renewed));
        assert!(times_from_expiry(b"another application's value"));
        assert!(times_from_expiry(b"idt2c"));
    }

    #[test]
    fn fields_hold_any_bytes_and_an_absent_result_stays_apart_from_an_empty_one() {
        let key = "a;b,c:d\u{0}e 12:x";
        let mut v = b"idt2c".to_vec();
        v.extend_from_slice(TOKEN.as_bytes());
        v.extend_from_slice(b"3,,100,200,,900,42;");
        v.extend_from_slice(&claim_fields(key, "n:1", "f", None));
        v.extend_from_slice(&outcome_fields(Some(""), Some("{\"e\":1}")));
        let r = decode(&v, -1).unwrap().record;
        assert_eq!(r.key, key);
        assert_eq!(r.name, "n:1");
        assert_eq!(r.result.as_deref(), Some(""));
        assert_eq!(r.error.as_deref(), Some("{\"e\":1}"));
        assert_eq!(
            (
                r.attempts,
                r.created_at,
                r.updated_at,
                r.expires_at,
                r.duration_ms
            ),
            (3, 100, 200, Some(900), Some(42))
        );
        assert_eq!(r.lease_expires_at, None, "a settled record has no lease");
        assert!(outcome_fields(None, None).is_empty());
    }

    #[test]
    fn values_that_are_not_records_are_refused() {
        for v in [
            &b"x"[..],
            b"idt2",
            b"idt2z0123456789abcdef0123456789abcdef1,,,,,,;",
            b"idt2p0123456789abcdef0123456789abcdef1,,,,,,",
            b"idt2p0123456789abcdef0123456789abcdef1,x,,,,,;",
            b"idt2p0123456789abcdef0123456789abcdef1,,,,,,;k9:short",
        ] {
            assert!(decode(v, -1).is_err(), "{}", String::from_utf8_lossy(v));
        }
        let released = b"idt2f--------------------------------2,,5,6,,,;e2:{}";
        assert_eq!(decode(released, -1).unwrap().token, None);
    }
}
