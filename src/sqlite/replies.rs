//! The promises of a store's writes, settled a committed batch at a time.
//!
//! napi-rs's deferred promise opens a threadsafe function per promise: a libuv handle
//! created, signalled, closed and finalized for every write, and two writes per call.
//! At 64 calls in flight that was about a fifth of the JavaScript thread's time (`perf`:
//! `napi_create_threadsafe_function`, its async callback, `CallFinalizer`, `CloseHandle`).
//! Here a store has one threadsafe function, made with its first write; the writer thread
//! queues each job's answer and, once a batch is committed, sends the whole batch's
//! answers through one call, which settles them all in one callback on the JavaScript
//! thread.
//!
//! The threadsafe function is weak (it does not keep the process alive by itself) and is
//! referenced while any promise is unsettled, so a script that awaits a write does not
//! exit before the commit, and an idle open store does not hold the process open.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use napi::bindgen_prelude::*;
use napi::sys;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};

use crate::failure::StoreResult;

/// One job's answer, to be given on the JavaScript thread.
type Answer = Box<dyn FnOnce(sys::napi_env) + Send>;

type Channel = ThreadsafeFunction<Vec<Answer>, (), (), Status, false, true>;

/// A promise's resolver. A raw `napi_deferred` may be moved to another thread as long as
/// it is only used on the JavaScript thread, which `Answer`s are.
struct Deferred(sys::napi_deferred);

// SAFETY: see above; the writer thread only carries it, inside an `Answer`.
unsafe impl Send for Deferred {}

pub struct Replies {
    channel: OnceLock<Channel>,
    /// Answers of the batch being committed, sent by `flush`.
    outbox: Mutex<Vec<Answer>>,
    /// Promises handed out and not yet settled. Only the JavaScript thread changes it.
    pending: AtomicUsize,
}

impl Replies {
    pub fn new() -> Arc<Self> {
        Arc::new(Replies {
            channel: OnceLock::new(),
            outbox: Mutex::new(Vec::new()),
            pending: AtomicUsize::new(0),
        })
    }

    /// A new promise and the function that answers it (from any thread; the answer reaches
    /// JavaScript at the next `flush`). JavaScript thread only.
    pub fn promise<'env, T: ToNapiValue + Send + 'static>(
        self: &Arc<Self>,
        env: &'env Env,
    ) -> Result<(Object<'env>, impl FnOnce(StoreResult<T>) + Send + 'static)> {
        let channel = self.channel(env)?;
        let mut deferred = std::ptr::null_mut();
        let mut promise = std::ptr::null_mut();
        // SAFETY: called on the JavaScript thread with its live env.
        check_status!(unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) })?;
        if self.pending.fetch_add(1, Ordering::Relaxed) == 0 {
            // SAFETY: JavaScript thread; the channel is alive while `self` is.
            unsafe { sys::napi_ref_threadsafe_function(env.raw(), channel.raw()) };
        }
        let deferred = Deferred(deferred);
        let replies = self.clone();
        let answer = move |outcome: StoreResult<T>| {
            let answer: Answer = Box::new(move |env| settle(env, deferred, outcome));
            replies
                .outbox
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(answer);
        };
        Ok((Object::from_raw(env.raw(), promise), answer))
    }

    /// Sends every queued answer to JavaScript in one call. Any thread.
    pub fn flush(&self) {
        let answers = std::mem::take(&mut *self.outbox.lock().unwrap_or_else(|p| p.into_inner()));
        if answers.is_empty() {
            return;
        }
        if let Some(channel) = self.channel.get() {
            // Not queued only when the environment is being torn down: nobody is left to
            // answer, and the answers are dropped.
            let _ = channel.call(answers, ThreadsafeFunctionCallMode::NonBlocking);
        }
    }

    fn channel(self: &Arc<Self>, env: &Env) -> Result<&Channel> {
        if let Some(channel) = self.channel.get() {
            return Ok(channel);
        }
        // The callback holds the store's replies weakly: the channel belongs to them.
        let replies: Weak<Replies> = Arc::downgrade(self);
        let target = env.create_function_from_closure::<(), (), _>("settleWrites", |_| Ok(()))?;
        let channel: Channel = target
            .build_threadsafe_function::<Vec<Answer>>()
            .callee_handled::<false>()
            .weak::<true>()
            .build_callback(move |ctx| {
                let count = ctx.value.len();
                for answer in ctx.value {
                    answer(ctx.env.raw());
                }
                if let Some(replies) = replies.upgrade() {
                    replies.settled(&ctx.env, count);
                }
                Ok(())
            })?;
        Ok(self.channel.get_or_init(|| channel))
    }

    /// `count` promises were settled (JavaScript thread): with none left, let the process exit.
    fn settled(&self, env: &Env, count: usize) {
        if self.pending.fetch_sub(count, Ordering::Relaxed) == count {
            if let Some(channel) = self.channel.get() {
                // SAFETY: JavaScript thread, inside the channel's own callback.
                unsafe { sys::napi_unref_threadsafe_function(env.raw(), channel.raw()) };
            }
        }
    }
}

/// Resolves or rejects one promise, exactly as napi-rs's own deferred does.
fn settle<T: ToNapiValue>(env: sys::napi_env, deferred: Deferred, outcome: StoreResult<T>) {
    // SAFETY: runs on the JavaScript thread, inside the channel's callback, with its env.
    unsafe {
        let value = outcome
            .map_err(Error::from)
            .and_then(|value| T::to_napi_value(env, value));
        match value {
            Ok(value) => {
                sys::napi_resolve_deferred(env, deferred.0, value);
            }
            Err(error) => {
                let error = ToNapiValue::to_napi_value(env, error).unwrap_or_else(|_| {
                    // Never leave a promise pending: a bare error if the real one cannot be made.
                    let (mut message, mut bare) = (std::ptr::null_mut(), std::ptr::null_mut());
                    let text = "idempotent-tools: a store write failed, and its error could not be created";
                    sys::napi_create_string_utf8(env, text.as_ptr().cast(), text.len() as isize, &mut message);
                    sys::napi_create_error(env, std::ptr::null_mut(), message, &mut bare);
                    bare
                });
                sys::napi_reject_deferred(env, deferred.0, error);
            }
        }
    }
}
