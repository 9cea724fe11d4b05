//! Hosts other than Unix (Windows): no loop transport (see on_loop/mod.rs); every call
//! goes through the Tokio transport. This stands in for `on_loop` there: `available` is
//! false, so an `OnLoop` is never made.

use std::sync::Arc;

use napi::bindgen_prelude::PromiseRaw;
use napi::Env;

use super::connection::Target;
use super::ops::{Op, OpReply};
use super::Inner;

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

    pub fn run_batch<'env>(
        &self,
        _env: &'env Env,
        _ops: Vec<Op>,
    ) -> napi::Result<PromiseRaw<'env, Vec<OpReply>>> {
        match *self {}
    }
}
