//! Promises made and settled on the JavaScript thread without napi-rs's async machinery
//! (which settles each promise through a threadsafe function from a Tokio thread): a
//! `Deferred` is resolved directly, and replies that arrive in a libuv callback are
//! handed to JavaScript inside a `CallbackScope`, so that the promise reactions (the
//! callers' continuations) run when it closes, as after any I/O callback of Node's.

use std::cell::Cell;
use std::ptr;

use napi::bindgen_prelude::ToNapiValue;
use napi::sys;

thread_local! {
    /// Set once this thread's Node environment is being torn down (a worker thread ending,
    /// the process exiting): JavaScript can no longer be called, so promises still
    /// pending are left as they are (nobody can await them any more).
    static ENV_GOING: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread's environment as going away (see `ENV_GOING`).
pub fn env_going() {
    ENV_GOING.with(|g| g.set(true));
}

fn env_gone() -> bool {
    ENV_GOING.with(Cell::get)
}

/// A promise's resolver. Settled exactly once; one dropped unsettled (a bug) rejects its
/// promise rather than leave a caller waiting forever.
pub struct Deferred {
    env: sys::napi_env,
    raw: sys::napi_deferred,
}

impl Deferred {
    /// A new promise and its resolver.
    pub fn new(env: sys::napi_env) -> napi::Result<(Deferred, sys::napi_value)> {
        let mut raw = ptr::null_mut();
        let mut promise = ptr::null_mut();
        // SAFETY: called on the JavaScript thread with its env.
        let status = unsafe { sys::napi_create_promise(env, &mut raw, &mut promise) };
        if status != sys::Status::napi_ok {
            return Err(napi::Error::from_reason("could not create a promise"));
        }
        Ok((Deferred { env, raw }, promise))
    }

    /// Resolves with `value`, or rejects with an `Error` of `message`.
    pub fn settle<T: ToNapiValue>(mut self, outcome: Result<T, String>) {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        if env_gone() {
            return;
        }
        // SAFETY: on the JavaScript thread, inside a handle scope (a napi call, or the
        // scope `CallbackScope` opens); `raw` is settled once.
        unsafe {
            match outcome.and_then(|v| T::to_napi_value(self.env, v).map_err(|e| e.reason.clone()))
            {
                Ok(v) => {
                    sys::napi_resolve_deferred(self.env, raw, v);
                }
                Err(message) => reject(self.env, raw, &message),
            }
        }
    }
}

unsafe fn reject(env: sys::napi_env, raw: sys::napi_deferred, message: &str) {
    let mut text = ptr::null_mut();
    let mut error = ptr::null_mut();
    sys::napi_create_string_utf8(
        env,
        message.as_ptr().cast(),
        message.len() as isize,
        &mut text,
    );
    sys::napi_create_error(env, ptr::null_mut(), text, &mut error);
    sys::napi_reject_deferred(env, raw, error);
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if !self.raw.is_null() && !env_gone() {
            // SAFETY: as in `settle`.
            unsafe {
                reject(
                    self.env,
                    self.raw,
                    "internal error in the native store (a bug, please report it): a Redis call was never answered",
                )
            };
        }
    }
}

/// What a libuv callback needs to call into JavaScript as Node's own I/O callbacks do: an
/// async resource (for async_hooks and AsyncLocalStorage) and its context.
pub struct CallbackScope {
    env: sys::napi_env,
    resource: sys::napi_ref,
    context: sys::napi_async_context,
}

impl CallbackScope {
    pub fn new(env: sys::napi_env) -> napi::Result<CallbackScope> {
        // SAFETY: on the JavaScript thread with its env, inside a napi call.
        unsafe {
            let mut resource = ptr::null_mut();
            let mut name = ptr::null_mut();
            let mut reference = ptr::null_mut();
            let mut context = ptr::null_mut();
            let label = "idempotent-tools:redis";
            let ok = sys::napi_create_object(env, &mut resource) == sys::Status::napi_ok
                && sys::napi_create_string_utf8(
                    env,
                    label.as_ptr().cast(),
                    label.len() as isize,
                    &mut name,
                ) == sys::Status::napi_ok
                && sys::napi_create_reference(env, resource, 1, &mut reference)
                    == sys::Status::napi_ok
                && sys::napi_async_init(env, resource, name, &mut context) == sys::Status::napi_ok;
            if !ok {
                return Err(napi::Error::from_reason(
                    "could not set up the Redis connection's callbacks",
                ));
            }
            Ok(CallbackScope {
                env,
                resource: reference,
                context,
            })
        }
    }

    /// Runs `f` as a callback into JavaScript: inside a handle scope and a callback scope,
    /// whose closing runs the microtasks (promise reactions) and `process.nextTick`s.
    ///
    /// # Safety
    /// Called on the JavaScript thread, from a libuv callback (not inside a napi call).
    pub unsafe fn run(&self, f: impl FnOnce()) {
        let env = self.env;
        let mut handles = ptr::null_mut();
        sys::napi_open_handle_scope(env, &mut handles);
        let mut resource = ptr::null_mut();
        sys::napi_get_reference_value(env, self.resource, &mut resource);
        let mut scope = ptr::null_mut();
        let opened = sys::napi_open_callback_scope(env, resource, self.context, &mut scope)
            == sys::Status::napi_ok;
        f();
        if opened {
            sys::napi_close_callback_scope(env, scope);
        }
        sys::napi_close_handle_scope(env, handles);
    }

    /// Releases the resource (when the env goes away or the connection is dropped).
    ///
    /// # Safety
    /// On the JavaScript thread; the scope is not used again.
    pub unsafe fn release(&mut self) {
        if !self.context.is_null() && !env_gone() {
            sys::napi_async_destroy(self.env, self.context);
            sys::napi_delete_reference(self.env, self.resource);
            self.context = ptr::null_mut();
        }
    }
}
