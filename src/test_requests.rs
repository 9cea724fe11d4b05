//! Requests the stores' Rust tests build (every store's tests, one set of builders).

use crate::claim::AcquireRequest;
use crate::record::SettleRequest;

/// A claim of `key` by a call of "charge" with fingerprint `fp`.
pub fn req(key: &str, fp: &str, lease_ms: f64, ttl_ms: Option<f64>, force: bool) -> AcquireRequest {
    AcquireRequest {
        key: key.into(),
        name: "charge".into(),
        fingerprint: fp.into(),
        lease_ms,
        ttl_ms,
        force,
        meta: None,
    }
}

/// A settle of `key` under `token`.
pub fn settle_req(
    key: &str,
    token: &str,
    result: Option<&str>,
    error: Option<&str>,
    ttl_ms: Option<f64>,
) -> SettleRequest {
    SettleRequest {
        key: key.into(),
        token: token.into(),
        result: result.map(Into::into),
        error: error.map(Into::into),
        ttl_ms,
        duration_ms: None,
    }
}
