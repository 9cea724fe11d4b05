//! Hosts other than Unix (Windows): no loop transport (see on_loop/mod.rs); every call
//! goes through the Tokio transport. This stands in for `on_loop` there: `available` is
//! false, so an `OnLoop` is never made.

use std::sync::Arc;

use napi::bindgen_prelude::PromiseRaw;
use napi::Env;

use super::batch::{AcquireReply, SettleReply};
use super::connection::Target;
use super::Inner;
use crate::claim::AcquireRequest;
use crate::record::SettleRequest;

/// Never made (no value of it exists).
pub enum OnLoop {}

pub fn available(_target: &Target, _cluster: bool) -> bool {
    false
}

impl OnLoop {
    pub fn new(_env: &Env, _inner: Arc<Inner>) -> napi::Result<OnLoop> {
        Err(napi::Error::from_reason(
            "no loop transport on this platform",
        ))
    }

    #[cfg_attr(test, allow(dead_code))]
    pub fn close(&self) {
        match *self {}
    }

    pub fn acquire_batch<'env>(
        &self,
        _env: &'env Env,
        _requests: Vec<AcquireRequest>,
    ) -> napi::Result<PromiseRaw<'env, Vec<AcquireReply>>> {
        match *self {}
    }

    pub fn complete_batch<'env>(
        &self,
        _env: &'env Env,
        _requests: Vec<SettleRequest>,
    ) -> napi::Result<PromiseRaw<'env, Vec<SettleReply>>> {
        match *self {}
    }

    pub fn flag_script<'env>(
        &self,
        _env: &'env Env,
        _what: &'static str,
        _script: &'static redis::Script,
        _key: String,
        _args: Vec<Vec<u8>>,
    ) -> napi::Result<PromiseRaw<'env, bool>> {
        match *self {}
    }
}
