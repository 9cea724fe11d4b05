//! libuv, the event loop of the JavaScript thread, reached through the symbols that the
//! `node` binary exports (libuv's stable 1.x API), looked up at run time: nothing is
//! linked, so a host that does not export them (or a test binary) simply has no
//! `Uv`, and the store keeps to its Tokio transport.
//!
//! Only what the connection needs: a poll handle on a socket, a timer, `uv_now`, closing
//! handles, ref/unref (a store with no call in flight must not keep Node alive), and
//! `uv_getaddrinfo` (DNS on libuv's thread pool, answered on the loop).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

pub type Handle = *mut c_void;
pub type Loop = *mut c_void;
pub type PollCb = unsafe extern "C" fn(handle: Handle, status: c_int, events: c_int);
pub type TimerCb = unsafe extern "C" fn(handle: Handle);
pub type CloseCb = unsafe extern "C" fn(handle: Handle);
pub type AddrInfoCb = unsafe extern "C" fn(req: Handle, status: c_int, res: *mut libc::addrinfo);

/// `uv_handle_type` and `uv_req_type` values (stable across libuv 1.x).
const UV_POLL: c_int = 8;
const UV_TIMER: c_int = 13;
const UV_GETADDRINFO: c_int = 8;
pub const READABLE: c_int = 1;
pub const WRITABLE: c_int = 2;

pub struct Uv {
    pub handle_size: unsafe extern "C" fn(c_int) -> usize,
    pub req_size: unsafe extern "C" fn(c_int) -> usize,
    pub poll_init_socket: unsafe extern "C" fn(Loop, Handle, c_int) -> c_int,
    pub poll_start: unsafe extern "C" fn(Handle, c_int, PollCb) -> c_int,
    pub timer_init: unsafe extern "C" fn(Loop, Handle) -> c_int,
    pub timer_start: unsafe extern "C" fn(Handle, TimerCb, u64, u64) -> c_int,
    pub timer_stop: unsafe extern "C" fn(Handle) -> c_int,
    pub close: unsafe extern "C" fn(Handle, Option<CloseCb>),
    pub handle_set_data: unsafe extern "C" fn(Handle, *mut c_void),
    pub handle_get_data: unsafe extern "C" fn(Handle) -> *mut c_void,
    pub req_set_data: unsafe extern "C" fn(Handle, *mut c_void),
    pub req_get_data: unsafe extern "C" fn(Handle) -> *mut c_void,
    pub uv_ref: unsafe extern "C" fn(Handle),
    pub uv_unref: unsafe extern "C" fn(Handle),
    pub now: unsafe extern "C" fn(Loop) -> u64,
    pub update_time: unsafe extern "C" fn(Loop),
    pub getaddrinfo: unsafe extern "C" fn(
        Loop,
        Handle,
        AddrInfoCb,
        *const c_char,
        *const c_char,
        *const libc::addrinfo,
    ) -> c_int,
    pub freeaddrinfo: unsafe extern "C" fn(*mut libc::addrinfo),
    /// The text of a libuv error code (`getaddrinfo`'s are `UV_EAI_*`, not errnos).
    pub strerror: unsafe extern "C" fn(c_int) -> *const c_char,
}

/// What a libuv error code means, in words (`uv_strerror`).
pub fn error_text(uv: &Uv, code: c_int) -> String {
    // SAFETY: uv_strerror returns a static NUL-terminated string for any code.
    let p = unsafe { (uv.strerror)(code) };
    if p.is_null() {
        return format!("libuv error {code}");
    }
    // SAFETY: see above.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[cfg(unix)]
fn symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the process's global symbols.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

#[cfg(not(unix))]
fn symbol(_: &CStr) -> Option<*mut c_void> {
    None
}

macro_rules! load {
    ($($field:ident = $name:literal),* $(,)?) => {{
        // SAFETY: each symbol is libuv's function of that name, whose C signature the
        // field's type spells out (libuv 1.x, stable).
        unsafe {
            Uv { $($field: std::mem::transmute::<*mut c_void, _>(symbol($name)?)),* }
        }
    }};
}

/// libuv's functions, when this process exports them (Node does).
// Each transmute's target is its field's type, which spells the C signature out.
#[allow(clippy::missing_transmute_annotations)]
pub fn uv() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(|| {
        Some(load!(
            handle_size = c"uv_handle_size",
            req_size = c"uv_req_size",
            poll_init_socket = c"uv_poll_init_socket",
            poll_start = c"uv_poll_start",
            timer_init = c"uv_timer_init",
            timer_start = c"uv_timer_start",
            timer_stop = c"uv_timer_stop",
            close = c"uv_close",
            handle_set_data = c"uv_handle_set_data",
            handle_get_data = c"uv_handle_get_data",
            req_set_data = c"uv_req_set_data",
            req_get_data = c"uv_req_get_data",
            uv_ref = c"uv_ref",
            uv_unref = c"uv_unref",
            now = c"uv_now",
            update_time = c"uv_update_time",
            getaddrinfo = c"uv_getaddrinfo",
            freeaddrinfo = c"uv_freeaddrinfo",
            strerror = c"uv_strerror",
        ))
    })
    .as_ref()
}

/// Memory for a handle (or request) of libuv's size for that type, zeroed; freed with
/// `free_raw` once libuv is done with it (a handle: in its close callback).
fn alloc(size: usize) -> Handle {
    let mut v = vec![0u64; size.div_ceil(8)].into_boxed_slice();
    let p = v.as_mut_ptr().cast::<c_void>();
    // Freed by `free_raw`, which asks libuv for the same size again.
    std::mem::forget(v);
    p
}

/// Frees memory from `alloc` of `size` bytes.
///
/// # Safety
/// `p` came from `alloc(size)` and libuv no longer uses it.
unsafe fn free_raw(p: Handle, size: usize) {
    let len = size.div_ceil(8);
    drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
        p.cast::<u64>(),
        len,
    )));
}

pub fn new_poll_handle(uv: &Uv) -> Handle {
    // SAFETY: plain libuv call.
    alloc(unsafe { (uv.handle_size)(UV_POLL) })
}

pub fn new_timer_handle(uv: &Uv) -> Handle {
    // SAFETY: plain libuv call.
    alloc(unsafe { (uv.handle_size)(UV_TIMER) })
}

pub fn new_getaddrinfo_req(uv: &Uv) -> Handle {
    // SAFETY: plain libuv call.
    alloc(unsafe { (uv.req_size)(UV_GETADDRINFO) })
}

/// The close callback of poll handles: frees the handle's memory.
pub unsafe extern "C" fn free_poll_handle(h: Handle) {
    if let Some(uv) = uv() {
        free_raw(h, (uv.handle_size)(UV_POLL));
    }
}

/// The close callback of timer handles: frees the handle's memory.
pub unsafe extern "C" fn free_timer_handle(h: Handle) {
    if let Some(uv) = uv() {
        free_raw(h, (uv.handle_size)(UV_TIMER));
    }
}

/// Frees a getaddrinfo request once its callback ran.
///
/// # Safety
/// `req` came from `new_getaddrinfo_req` and its callback has run.
pub unsafe fn free_getaddrinfo_req(uv: &Uv, req: Handle) {
    free_raw(req, (uv.req_size)(UV_GETADDRINFO));
}
