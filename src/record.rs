//! The record a store keeps per key, and its shape as JavaScript sees it.

use napi_derive::napi;

use crate::failure::{StoreFailure, StoreResult};

pub const PENDING: &str = "pending";
pub const COMPLETED: &str = "completed";
pub const FAILED: &str = "failed";

/// One key's record. Times are epoch milliseconds. `result` and `error` hold JSON text:
/// the TypeScript layer encodes and parses them, so the core never interprets a result.
#[derive(Clone, Debug, PartialEq)]
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
    pub lease_expires_at: Option<i64>,
}

impl Record {
    pub fn lease_alive(&self, now: i64) -> bool {
        self.status == PENDING && self.lease_expires_at.is_some_and(|t| t > now)
    }

    /// Past its `ttlMs`, a record counts as never seen, whatever its status, except a
    /// pending record whose owner still holds a live lease: expiring that one would let a
    /// second call run while the first is still running.
    pub fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|t| t <= now) && !self.lease_alive(now)
    }
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
    pub fn count(&mut self, r: &Record, now: i64) {
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

/// What `complete` and `fail` store for a claim.
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
}

impl SettleRequest {
    /// Refuses text that could not be given back: `result` must be JSON and `error` a JSON
    /// object with a string `name` and `message`. The wrapper always sends such text; this
    /// guards the store against any other caller of the public store interface.
    pub fn check(&self) -> StoreResult<()> {
        if let Some(result) = &self.result {
            serde_json::from_str::<serde_json::Value>(result).map_err(|e| {
                StoreFailure::new(format!("the result to store is not valid JSON text ({e})"))
            })?;
        }
        if let Some(error) = &self.error {
            let value: serde_json::Value = serde_json::from_str(error).map_err(|e| {
                StoreFailure::new(format!("the error to store is not valid JSON text ({e})"))
            })?;
            if !(value["name"].is_string() && value["message"].is_string()) {
                return Err(StoreFailure::new(
                    "the error to store must be a JSON object with string \"name\" and \"message\"",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settle(result: Option<&str>, error: Option<&str>) -> SettleRequest {
        SettleRequest {
            key: "k".into(),
            token: "t".into(),
            result: result.map(Into::into),
            error: error.map(Into::into),
            ttl_ms: None,
        }
    }

    #[test]
    fn only_text_that_can_be_given_back_is_stored() {
        assert!(settle(Some(r#"{"a":[1,"x"]}"#), None).check().is_ok());
        assert!(settle(None, Some(r#"{"name":"E","message":"m"}"#))
            .check()
            .is_ok());
        assert!(settle(None, None).check().is_ok());
        assert!(settle(Some("{not json"), None).check().is_err());
        assert!(settle(Some(""), None).check().is_err());
        assert!(settle(None, Some(r#"{"name":"E"}"#)).check().is_err());
        assert!(settle(None, Some("oops")).check().is_err());
    }
}
