//! Records of format 1: a hash per key, as versions before format 2 (`record.rs`) wrote
//! them. Reads (`get`, listings) show them as they are; the scripts migrate one to format
//! 2 when they claim it or find it settled (lua/claim.lua, lua/release.lua), never while
//! a live claim of an older process holds it (so that process can still settle it).
//!
//! Fields: `key` (the record's own key: what marks it as this store's), `name`,
//! `fingerprint`, `status`, `token`, `result`, `error`, `attempts`, `created_at`,
//! `updated_at`, `expires_at`, `lease_expires_at`, `settled_token`, `meta`, `duration_ms`.

use std::collections::HashMap;

use redis::Value;

use crate::record::{Record, COMPLETED, FAILED, PENDING};

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A hash as field -> value, from HGETALL (RESP2 flat array or RESP3 map); `None` for a
/// reply that is not a hash.
pub fn fields(v: &Value) -> Option<HashMap<String, String>> {
    let mut out = HashMap::new();
    match v {
        Value::Array(items) => {
            for pair in items.chunks(2) {
                if let [f, v] = pair {
                    out.insert(text(f)?, text(v)?);
                }
            }
        }
        Value::Map(pairs) => {
            for (f, v) in pairs {
                out.insert(text(f)?, text(v)?);
            }
        }
        Value::Nil => {}
        _ => return None,
    }
    Some(out)
}

/// A hash under the prefix is this store's record only when its `key` field, appended to
/// the prefix, gives back its Redis key: another application's hashes have no such field,
/// and a store whose prefix extends ours (`p:sub:` under `p:`) wrote its own key there.
pub fn own_record(key: &str, f: &HashMap<String, String>) -> bool {
    f.get("key").is_some_and(|k| k == key)
}

/// A format-1 record, read.
pub fn to_record(key: &str, mut f: HashMap<String, String>) -> Result<Record, String> {
    let mut take = |name: &str| f.remove(name);
    let mut required =
        |name: &str| take(name).ok_or_else(|| format!("record '{key}' has no {name}"));
    let name = required("name")?;
    let fingerprint = required("fingerprint")?;
    let status = required("status")?;
    if ![PENDING, COMPLETED, FAILED].contains(&status.as_str()) {
        return Err(format!("record '{key}' has an unknown status '{status}'"));
    }
    let number = |name: &str, v: Option<String>| -> Result<Option<i64>, String> {
        v.map(|s| {
            s.parse::<i64>()
                .map_err(|_| format!("record '{key}' has a malformed {name}"))
        })
        .transpose()
    };
    let attempts = number("attempts", take("attempts"))?.unwrap_or(1);
    let created_at = number("created_at", take("created_at"))?.unwrap_or(0);
    let pending = status == PENDING;
    Ok(Record {
        key: key.to_string(),
        name,
        fingerprint,
        token: take("token").filter(|t| !t.is_empty() && pending),
        result: take("result"),
        error: take("error"),
        attempts: u32::try_from(attempts.max(0)).unwrap_or(u32::MAX),
        created_at,
        updated_at: number("updated_at", take("updated_at"))?.unwrap_or(created_at),
        expires_at: number("expires_at", take("expires_at"))?,
        lease_expires_at: number("lease_expires_at", take("lease_expires_at"))?.filter(|_| pending),
        meta: take("meta").filter(|m| !m.is_empty()),
        duration_ms: number("duration_ms", take("duration_ms"))?,
        status,
        // Redis keeps no namespace: a store's prefix is its namespace.
        ..Record::default()
    })
}
