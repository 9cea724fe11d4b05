//! One connection to one Redis server, driven by the JavaScript thread's libuv loop: a
//! non-blocking socket that libuv watches, written as soon as a call is made and read in
//! the loop's poll phase, as Node's own sockets are. No other thread takes part, so a
//! call costs no thread hop and no cross-thread wake-up.
//!
//! What it keeps of the Tokio transport's behaviour (connection.rs):
//! - opened on first use (DNS through libuv's thread pool), and again after any failure;
//! - nothing of a request is sent before the connection's handshake (AUTH, SELECT, the
//!   client's name) has been answered: a command pipelined behind a refused AUTH or SELECT
//!   would run anyway, as the server's default user or on database 0, and leave a claim
//!   there that nobody settles; a refused handshake fails the requests instead;
//! - every request (a pipeline of commands) is answered within `connectTimeoutMs +
//!   commandTimeoutMs` of being made, or fails; when the server stops answering, every
//!   request on the connection fails and the connection is dropped (a late reply must
//!   never answer a later request);
//! - a request cut off by a dropped connection (the server restarted, say) is sent once
//!   more on a new connection: every command the store sends is safe to resend (a claim
//!   or a settle recognises its own token);
//! - an idle connection does not keep Node running (its handles are unreferenced while no
//!   request is in flight).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::{c_int, c_void, CString};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::rc::Rc;

use mio::net::TcpStream;
use redis::Value;

use super::super::connection::{refused_auth, refused_select, NEEDS_PASSWORD};
use super::js::CallbackScope;
use super::resp;
use super::uv::{self, Handle, Uv};

/// What the socket is read into at a time.
const READ_CHUNK: usize = 64 * 1024;
/// The most read in one turn of the event loop.
const READ_PER_TURN: usize = 4 << 20;
/// An outgoing buffer larger than this is given back once sent.
const OUT_KEEP: usize = 1 << 20;

/// A connection, shared by the store and by its libuv handles (each open handle holds a
/// strong reference, released in its close callback).
pub type Shared = Rc<RefCell<Conn>>;

/// What a request's replies (one per command, in order), or what failed them (a cause,
/// which the caller words as the failure of its own operation), are handed to.
pub type Done = Box<dyn FnOnce(&Shared, Result<Vec<Value>, String>)>;

type Answer = (Done, Result<Vec<Value>, String>);

/// Where to connect and how.
pub struct Settings {
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: i64,
    pub connect_timeout_ms: u64,
    pub command_timeout_ms: u64,
}

struct Request {
    /// The commands, packed (RESP).
    packed: Vec<u8>,
    /// How many replies it waits for.
    count: usize,
    replies: Vec<Value>,
    /// When it fails unanswered (uv_now ms).
    deadline: u64,
    /// Already sent once on a connection that dropped, or waited through a handshake on
    /// one that dropped: the next drop fails it (a server that keeps dropping the
    /// connection is an error, not a loop of reconnections).
    resent: bool,
    /// AUTH, SELECT and the client's name: checked here, never resent.
    handshake: bool,
    done: Done,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// No connection.
    Idle,
    /// Resolving the host, or connecting.
    Connecting,
    /// Connected, the handshake sent and not yet answered: requests wait.
    Handshaking,
    Ready,
}

pub struct Conn {
    uv: &'static Uv,
    event_loop: uv::Loop,
    scope: CallbackScope,
    settings: Settings,
    state: State,
    /// Counts connection attempts, so that a DNS answer for an abandoned one is ignored.
    attempt: u64,
    socket: Option<TcpStream>,
    /// The poll handle watching `socket` (null without one), and what it watches.
    poll: Handle,
    events: c_int,
    timer: Handle,
    /// Whether the handles keep the loop alive (only while requests are in flight).
    referenced: bool,
    out: Vec<u8>,
    out_at: usize,
    /// Reads the server's replies, trusting nothing in them (see `resp`); a new one for
    /// each connection, so that what a dropped one held is given back.
    reader: resp::Reader,
    /// What the socket is read into (allocated while connected).
    chunk: Vec<u8>,
    /// Sent, waiting for replies, in the order sent.
    sent: VecDeque<Request>,
    /// Made while not connected: sent once connected.
    waiting: VecDeque<Request>,
    connect_deadline: u64,
    addrs: Vec<SocketAddr>,
    next_addr: usize,
    /// Answers decided while the connection was borrowed, handed out after.
    answers: Vec<Answer>,
    closed: bool,
    /// This connection's `Rc`, as the handles' data.
    this: *const RefCell<Conn>,
}

impl Conn {
    /// A connection that opens on first use. On the JavaScript thread, inside a napi call.
    pub fn new(
        uv: &'static Uv,
        env: napi::sys::napi_env,
        settings: Settings,
    ) -> napi::Result<Shared> {
        let mut event_loop = std::ptr::null_mut();
        // SAFETY: the env of the current napi call.
        unsafe { napi::sys::napi_get_uv_event_loop(env, &mut event_loop) };
        if event_loop.is_null() {
            return Err(napi::Error::from_reason("no event loop"));
        }
        let shared = Rc::new(RefCell::new(Conn {
            uv,
            event_loop: event_loop.cast(),
            scope: CallbackScope::new(env)?,
            settings,
            state: State::Idle,
            attempt: 0,
            socket: None,
            poll: std::ptr::null_mut(),
            events: 0,
            timer: std::ptr::null_mut(),
            referenced: false,
            out: Vec::new(),
            out_at: 0,
            reader: resp::Reader::default(),
            chunk: Vec::new(),
            sent: VecDeque::new(),
            waiting: VecDeque::new(),
            connect_deadline: 0,
            addrs: Vec::new(),
            next_addr: 0,
            answers: Vec::new(),
            closed: false,
            this: std::ptr::null(),
        }));
        shared.borrow_mut().this = Rc::as_ptr(&shared);
        Ok(shared)
    }

    /// Sends a pipeline of `count` commands (`packed`); `done` gets their replies, or the
    /// cause of their failure. On the JavaScript thread, inside a napi call or a `done` of
    /// an earlier request.
    pub fn send(this: &Shared, packed: Vec<u8>, count: usize, done: Done) {
        let answers = {
            let mut c = this.borrow_mut();
            c.enqueue(packed, count, done);
            std::mem::take(&mut c.answers)
        };
        hand_out(this, answers, false);
    }

    fn enqueue(&mut self, packed: Vec<u8>, count: usize, done: Done) {
        if self.closed {
            self.answers.push((done, Err("the store is closed".into())));
            return;
        }
        // Bounded like the Tokio transport's requests: a reply within commandTimeoutMs of
        // being sent (see `send_now`), a connection first within connectTimeoutMs.
        let deadline = self.now() + self.bound_ms();
        let mut request = Request {
            packed,
            count,
            replies: Vec::with_capacity(count),
            deadline,
            resent: false,
            handshake: false,
            done,
        };
        match self.state {
            State::Ready => {
                self.send_now(&mut request);
                self.sent.push_back(request);
                self.flush();
            }
            State::Connecting | State::Handshaking => self.waiting.push_back(request),
            State::Idle => {
                self.waiting.push_back(request);
                self.start_connect();
            }
        }
        self.settle_handles();
    }

    /// Fails every request and closes the connection for good (`store.close()`, the store
    /// object collected, or Node's environment going away).
    pub fn close(this: &Shared) {
        let answers = {
            let mut c = this.borrow_mut();
            if c.closed {
                return;
            }
            c.closed = true;
            c.fail_all("the store is closed");
            c.disconnect();
            if !c.timer.is_null() {
                // SAFETY: our open timer; its close callback releases its reference.
                unsafe { (c.uv.close)(c.timer, Some(on_timer_closed)) };
                c.timer = std::ptr::null_mut();
            }
            std::mem::take(&mut c.answers)
        };
        hand_out(this, answers, false);
        // SAFETY: on the JavaScript thread; the scope is not used again.
        unsafe { this.borrow_mut().scope.release() };
    }

    // ------------------------------------------------------------------ time

    fn now(&self) -> u64 {
        // SAFETY: this thread's loop.
        unsafe {
            (self.uv.update_time)(self.event_loop);
            (self.uv.now)(self.event_loop)
        }
    }

    fn bound_ms(&self) -> u64 {
        self.settings.connect_timeout_ms + self.settings.command_timeout_ms
    }

    /// Starts the timer for the nearest deadline (a connect, the oldest request), or stops
    /// it; and keeps the loop alive exactly while requests are in flight.
    fn settle_handles(&mut self) {
        let mut next: Option<u64> = None;
        let mut consider = |t: u64| next = Some(next.map_or(t, |n: u64| n.min(t)));
        if self.state == State::Connecting {
            consider(self.connect_deadline);
        }
        if let Some(r) = self.sent.front() {
            consider(r.deadline);
        }
        if let Some(r) = self.waiting.front() {
            consider(r.deadline);
        }
        if self.timer.is_null() && next.is_some() && !self.closed {
            let timer = uv::new_timer_handle(self.uv);
            // SAFETY: a fresh handle of the timer's size, on this thread's loop. It holds
            // a reference to this connection until its close callback.
            unsafe {
                (self.uv.timer_init)(self.event_loop, timer);
                Rc::increment_strong_count(self.this);
                (self.uv.handle_set_data)(timer, self.this as *mut c_void);
            }
            self.timer = timer;
            self.referenced = true;
        }
        if self.timer.is_null() {
            return;
        }
        let now = self.now();
        // SAFETY: our open timer.
        unsafe {
            match next {
                Some(at) => (self.uv.timer_start)(self.timer, on_timer, at.saturating_sub(now), 0),
                None => (self.uv.timer_stop)(self.timer),
            };
        }
        let busy = !self.sent.is_empty() || !self.waiting.is_empty();
        if busy != self.referenced {
            let f = if busy {
                self.uv.uv_ref
            } else {
                self.uv.uv_unref
            };
            // SAFETY: our open handles.
            unsafe {
                f(self.timer);
                if !self.poll.is_null() {
                    f(self.poll);
                }
            }
            self.referenced = busy;
        }
    }

    fn on_timer(&mut self) {
        let now = self.now();
        if self.state == State::Connecting && now >= self.connect_deadline {
            let cause = format!(
                "timed out (connect timeout {} ms, command timeout {} ms)",
                self.settings.connect_timeout_ms, self.settings.command_timeout_ms
            );
            self.connect_failed(&cause);
        }
        if self.sent.front().is_some_and(|r| r.deadline <= now) {
            // The server stopped answering: whatever is on this connection can no longer
            // be told apart (a late reply would answer the wrong request), so all of it
            // fails, and the next call opens a new connection.
            let cause = format!(
                "no answer within the command timeout ({} ms)",
                self.settings.command_timeout_ms
            );
            self.fail_all(&cause);
            self.disconnect();
        } else if self.waiting.front().is_some_and(|r| r.deadline <= now) {
            let cause = format!(
                "no answer within {} ms (connect timeout {} ms + command timeout {} ms)",
                self.bound_ms(),
                self.settings.connect_timeout_ms,
                self.settings.command_timeout_ms
            );
            self.fail_all(&cause);
            self.disconnect();
        }
        self.settle_handles();
    }

    // ------------------------------------------------------------------ connecting

    fn start_connect(&mut self) {
        self.state = State::Connecting;
        self.attempt += 1;
        self.connect_deadline = self.now() + self.settings.connect_timeout_ms;
        let host = self
            .settings
            .host
            .trim_start_matches('[')
            .trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            self.addrs = vec![SocketAddr::new(ip, self.settings.port)];
            self.next_addr = 0;
            self.try_connect(None);
            return;
        }
        let (Ok(node), Ok(service)) = (
            CString::new(host),
            CString::new(self.settings.port.to_string()),
        ) else {
            self.connect_failed("the host name holds a NUL byte");
            return;
        };
        // SAFETY: `hints` is zeroed except for the socket type; the request is freed in
        // `on_resolved`, which also releases the reference its data holds.
        unsafe {
            let mut hints: libc::addrinfo = std::mem::zeroed();
            hints.ai_socktype = libc::SOCK_STREAM;
            let req = uv::new_getaddrinfo_req(self.uv);
            let data = Box::new(Resolving {
                conn: self.this,
                attempt: self.attempt,
            });
            Rc::increment_strong_count(self.this);
            (self.uv.req_set_data)(req, Box::into_raw(data).cast());
            let rc = (self.uv.getaddrinfo)(
                self.event_loop,
                req,
                on_resolved,
                node.as_ptr(),
                service.as_ptr(),
                &hints,
            );
            if rc != 0 {
                drop(Box::from_raw(
                    (self.uv.req_get_data)(req).cast::<Resolving>(),
                ));
                Rc::decrement_strong_count(self.this);
                uv::free_getaddrinfo_req(self.uv, req);
                self.connect_failed(&format!(
                    "could not resolve {host} ({}): is the host name in the URL right?",
                    uv::error_text(self.uv, rc)
                ));
            }
        }
    }

    fn resolved(&mut self, addrs: Result<Vec<SocketAddr>, String>) {
        match addrs {
            Ok(addrs) if !addrs.is_empty() => {
                self.addrs = addrs;
                self.next_addr = 0;
                self.try_connect(None);
            }
            Ok(_) => self.connect_failed(&format!(
                "could not resolve {}: no address",
                self.settings.host
            )),
            Err(e) => self.connect_failed(&e),
        }
    }

    /// Connects to the next address (after `last`, the previous one's failure).
    fn try_connect(&mut self, mut last: Option<std::io::Error>) {
        while let Some(addr) = self.addrs.get(self.next_addr).copied() {
            match TcpStream::connect(addr) {
                Ok(socket) => {
                    self.watch(socket, uv::WRITABLE);
                    return;
                }
                Err(e) => {
                    last = Some(e);
                    self.next_addr += 1;
                }
            }
        }
        let cause = match last {
            Some(e) if e.kind() == ErrorKind::ConnectionRefused => {
                format!("connection refused, is the server running? ({e})")
            }
            Some(e) => e.to_string(),
            None => "no address to connect to".to_string(),
        };
        self.connect_failed(&cause);
    }

    /// The socket became writable while connecting: connected, or refused.
    fn connect_done(&mut self) {
        let error = match self.socket.as_ref().map(|s| s.take_error()) {
            Some(Ok(None)) => match self.socket.as_ref().map(|s| s.peer_addr()) {
                Some(Ok(_)) => None,
                Some(Err(e)) => Some(e),
                None => return,
            },
            Some(Ok(Some(e))) | Some(Err(e)) => Some(e),
            None => return,
        };
        if let Some(e) = error {
            self.unwatch();
            self.next_addr += 1;
            self.try_connect(Some(e));
            return;
        }
        if let Some(s) = &self.socket {
            let _ = s.set_nodelay(true);
        }
        self.state = State::Handshaking;
        self.send_handshake();
        self.flush();
    }

    /// The handshake was answered OK: what waited goes out.
    fn handshake_done(&mut self) {
        self.state = State::Ready;
        while let Some(mut r) = self.waiting.pop_front() {
            self.send_now(&mut r);
            self.sent.push_back(r);
        }
        self.flush();
    }

    /// Puts a request's commands on the wire; its reply is due within commandTimeoutMs.
    fn send_now(&mut self, r: &mut Request) {
        self.out.extend_from_slice(&r.packed);
        r.deadline = self.now() + self.settings.command_timeout_ms;
    }

    /// AUTH, SELECT and the client's name, ahead of everything else on the connection.
    fn send_handshake(&mut self) {
        let mut cmds: Vec<redis::Cmd> = Vec::new();
        if let Some(password) = &self.settings.password {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = &self.settings.username {
                auth.arg(user);
            }
            auth.arg(password);
            cmds.push(auth);
        }
        if self.settings.db != 0 {
            cmds.push(redis::cmd("SELECT").arg(self.settings.db).clone());
        }
        for (field, value) in [
            ("LIB-NAME", "idempotent-tools"),
            ("LIB-VER", env!("CARGO_PKG_VERSION")),
        ] {
            cmds.push(
                redis::cmd("CLIENT")
                    .arg("SETINFO")
                    .arg(field)
                    .arg(value)
                    .clone(),
            );
        }
        let mut packed = Vec::new();
        for c in &cmds {
            c.write_packed_command(&mut packed);
        }
        self.out.extend_from_slice(&packed);
        self.sent.push_back(Request {
            packed,
            count: cmds.len(),
            replies: Vec::new(),
            deadline: self.now() + self.settings.command_timeout_ms,
            resent: true,
            handshake: true,
            done: Box::new(|_, _| {}),
        });
    }

    /// The handshake's replies: an AUTH or SELECT refused fails every request, none of
    /// which was sent (the connection is dropped, so the next call tries again, with
    /// whatever the server accepts by then); the client's name is a courtesy (older
    /// servers do not know it, an ACL user may not be allowed it), unless the server
    /// answers it NOAUTH: it wants a password the URL does not give.
    fn check_handshake(&mut self, replies: &[Value]) -> bool {
        // The replies in the order sent: AUTH (with a password), SELECT (a database other
        // than 0), then the client's name.
        let mut replies = replies.iter();
        let mut refused = None;
        if self.settings.password.is_some() {
            if let Some(Value::ServerError(e)) = replies.next() {
                refused = Some(refused_auth(e.details().unwrap_or(e.code())));
            }
        }
        if refused.is_none() && self.settings.db != 0 {
            match replies.next() {
                Some(Value::ServerError(e)) if e.code() == "NOAUTH" => {
                    refused = Some(NEEDS_PASSWORD.to_string());
                }
                Some(Value::ServerError(e)) => {
                    refused = Some(refused_select(
                        self.settings.db,
                        Some(e.code()),
                        e.details().unwrap_or_default(),
                    ));
                }
                _ => {}
            }
        }
        if refused.is_none()
            && replies.any(|r| matches!(r, Value::ServerError(e) if e.code() == "NOAUTH"))
        {
            refused = Some(NEEDS_PASSWORD.to_string());
        }
        let Some(cause) = refused else {
            self.handshake_done();
            return true;
        };
        self.fail_all(&cause);
        self.disconnect();
        false
    }

    fn connect_failed(&mut self, cause: &str) {
        self.disconnect();
        for r in self.waiting.drain(..).chain(self.sent.drain(..)) {
            self.answers.push((r.done, Err(cause.to_string())));
        }
    }

    // ------------------------------------------------------------------ the socket

    fn watch(&mut self, socket: TcpStream, events: c_int) {
        use std::os::fd::AsRawFd;
        let poll = uv::new_poll_handle(self.uv);
        // SAFETY: a fresh handle of the poll's size on this thread's loop, for a socket we
        // own; it holds a reference to this connection until its close callback.
        unsafe {
            (self.uv.poll_init_socket)(self.event_loop, poll, socket.as_raw_fd());
            Rc::increment_strong_count(self.this);
            (self.uv.handle_set_data)(poll, self.this as *mut c_void);
            (self.uv.poll_start)(poll, events, on_poll);
            if !self.referenced {
                (self.uv.uv_unref)(poll);
            }
        }
        self.socket = Some(socket);
        self.poll = poll;
        self.events = events;
    }

    fn set_events(&mut self, events: c_int) {
        if self.poll.is_null() || events == self.events {
            return;
        }
        // SAFETY: our open poll handle.
        unsafe { (self.uv.poll_start)(self.poll, events, on_poll) };
        self.events = events;
    }

    fn unwatch(&mut self) {
        if !self.poll.is_null() {
            // SAFETY: our open poll handle (closing it stops it at once); its close
            // callback frees it and releases its reference.
            unsafe { (self.uv.close)(self.poll, Some(on_poll_closed)) };
            self.poll = std::ptr::null_mut();
        }
        self.socket = None;
    }

    /// Drops the connection (the requests on it are answered by the caller).
    fn disconnect(&mut self) {
        self.unwatch();
        self.state = State::Idle;
        // The buffers' memory goes with the connection (a hostile or broken server may have
        // made them large).
        self.out = Vec::new();
        self.out_at = 0;
        self.reader = resp::Reader::default();
        self.chunk = Vec::new();
    }

    /// Every request failed with `cause`.
    fn fail_all(&mut self, cause: &str) {
        for r in self.sent.drain(..).chain(self.waiting.drain(..)) {
            if !r.handshake {
                self.answers.push((r.done, Err(cause.to_string())));
            }
        }
    }

    /// The connection broke (the server closed it, a reset, a write that failed): what was
    /// on it is sent once more on a new connection; what was already resent fails.
    fn dropped(&mut self, cause: &str) {
        let handshaking = self.state == State::Handshaking;
        self.disconnect();
        let mut again = VecDeque::new();
        for mut r in self.sent.drain(..) {
            if r.handshake {
                continue;
            }
            if r.resent {
                self.answers.push((r.done, Err(cause.to_string())));
            } else {
                r.resent = true;
                r.replies.clear();
                again.push_back(r);
            }
        }
        // Dropped during the handshake: nothing of the waiting requests was sent, but a
        // server that drops every connection there must not be retried forever.
        for mut r in self.waiting.drain(..) {
            if handshaking && r.resent {
                self.answers.push((r.done, Err(cause.to_string())));
            } else {
                r.resent |= handshaking;
                again.push_back(r);
            }
        }
        self.waiting = again;
        if !self.waiting.is_empty() {
            self.start_connect();
        }
    }

    fn flush(&mut self) {
        let Some(socket) = self.socket.as_mut() else {
            return;
        };
        while self.out_at < self.out.len() {
            match socket.write(&self.out[self.out_at..]) {
                Ok(0) => return self.dropped("the connection closed"),
                Ok(n) => self.out_at += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return self.dropped(&e.to_string()),
            }
        }
        if self.out_at == self.out.len() {
            self.out.clear();
            self.out_at = 0;
            if self.out.capacity() > OUT_KEEP {
                // A large settle went out: its size is not kept for the connection's life.
                self.out = Vec::new();
            }
            self.set_events(uv::READABLE);
        } else {
            self.set_events(uv::READABLE | uv::WRITABLE);
        }
    }

    /// Reads what the server sent, and hands each whole reply to its request. At most
    /// `READ_PER_TURN` bytes per turn of the loop (the poll is level-triggered: the rest
    /// is read in the next turn), so that a fast stream of bytes cannot hold the loop.
    fn on_readable(&mut self) {
        let mut read = 0;
        while read < READ_PER_TURN {
            let Some(socket) = self.socket.as_mut() else {
                return;
            };
            if self.chunk.is_empty() {
                self.chunk = vec![0; READ_CHUNK];
            }
            match socket.read(&mut self.chunk) {
                Ok(0) => return self.dropped("the server closed the connection"),
                Ok(n) => {
                    read += n;
                    self.reader.feed(&self.chunk[..n]);
                    if !self.take_replies() {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return self.dropped(&e.to_string()),
            }
        }
    }

    /// Every whole reply read so far, each to its request. False when the connection
    /// ended (bytes that are not RESP, or over the reader's limits, end it: what follows
    /// them can no longer be told apart).
    fn take_replies(&mut self) -> bool {
        loop {
            match self.reader.next() {
                Ok(Some(value)) => {
                    if !self.deliver(value) {
                        return false;
                    }
                }
                Ok(None) => return true,
                Err(e) => {
                    self.fail_all(&format!("unexpected reply from the server: {e}"));
                    self.disconnect();
                    return false;
                }
            }
        }
    }

    /// One reply, for the oldest request. False when it ended the connection.
    fn deliver(&mut self, value: Value) -> bool {
        let Some(front) = self.sent.front_mut() else {
            self.fail_all("unexpected reply from the server: a reply nobody asked for");
            self.disconnect();
            return false;
        };
        front.replies.push(value);
        if front.replies.len() < front.count {
            return true;
        }
        let r = self.sent.pop_front().expect("the front request");
        if r.handshake {
            return self.check_handshake(&r.replies);
        }
        self.answers.push((r.done, Ok(r.replies)));
        true
    }

    fn on_poll(&mut self, status: c_int, events: c_int) {
        if status < 0 {
            // The socket's own error says why (a refused connect shows up here as a poll
            // error, whose libuv code is not the reason): the same words as the Tokio transport.
            let socket_error = self
                .socket
                .as_ref()
                .and_then(|s| s.take_error().ok().flatten());
            let error = socket_error.unwrap_or_else(|| std::io::Error::from_raw_os_error(-status));
            if self.state == State::Connecting {
                self.unwatch();
                self.next_addr += 1;
                self.try_connect(Some(error));
            } else {
                self.dropped(&format!("the connection failed: {error}"));
            }
            return;
        }
        if self.state == State::Connecting {
            if events & uv::WRITABLE != 0 {
                self.connect_done();
            }
            return;
        }
        if events & uv::READABLE != 0 {
            self.on_readable();
        }
        if events & uv::WRITABLE != 0 && matches!(self.state, State::Handshaking | State::Ready) {
            self.flush();
        }
    }
}

/// Hands out answers: from a libuv callback (`from_loop`) as a callback into JavaScript
/// (see `CallbackScope`), from a napi call as they are. No borrow of the connection is
/// held meanwhile: a `done` may send the next request.
fn hand_out(this: &Shared, answers: Vec<Answer>, from_loop: bool) {
    if answers.is_empty() {
        return;
    }
    let run = || {
        for (done, outcome) in answers {
            // A panic must not unwind into libuv or Node: the request's promise is
            // rejected instead (its Deferred, dropped unsettled, does that).
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| done(this, outcome)));
            // What a `done` sent may have failed at once.
            let more = std::mem::take(&mut this.borrow_mut().answers);
            for (done, outcome) in more {
                let _ =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| done(this, outcome)));
            }
        }
    };
    if from_loop {
        let scope: *const CallbackScope = {
            let c = this.borrow();
            &c.scope
        };
        // SAFETY: on the JavaScript thread in a libuv callback; the scope lives as long as
        // the connection, which `this` keeps alive, and is not borrowed mutably meanwhile
        // (only `close` releases it, after handing out).
        unsafe { (*scope).run(run) };
    } else {
        run();
    }
}

/// The connection a handle's data points at, as a strong reference for the callback.
///
/// # Safety
/// `data` is a connection's `this`, and the handle holds a reference to it.
unsafe fn conn_of(data: *mut c_void) -> Shared {
    let p = data as *const RefCell<Conn>;
    Rc::increment_strong_count(p);
    Rc::from_raw(p)
}

/// Runs `f` on the connection of a libuv callback, then hands out what it decided.
fn in_callback(this: Shared, f: impl FnOnce(&mut Conn)) {
    let answers = {
        let Ok(mut c) = this.try_borrow_mut() else {
            return;
        };
        f(&mut c);
        c.settle_handles();
        std::mem::take(&mut c.answers)
    };
    hand_out(&this, answers, true);
}

unsafe extern "C" fn on_poll(handle: Handle, status: c_int, events: c_int) {
    let Some(uv) = uv::uv() else { return };
    let this = conn_of((uv.handle_get_data)(handle));
    // A callback of a handle that was closed meanwhile has nothing to do.
    if this.borrow().poll != handle {
        return;
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        in_callback(this, |c| c.on_poll(status, events))
    }));
}

unsafe extern "C" fn on_timer(handle: Handle) {
    let Some(uv) = uv::uv() else { return };
    let this = conn_of((uv.handle_get_data)(handle));
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        in_callback(this, |c| c.on_timer())
    }));
}

unsafe extern "C" fn on_poll_closed(handle: Handle) {
    if let Some(uv) = uv::uv() {
        Rc::decrement_strong_count((uv.handle_get_data)(handle) as *const RefCell<Conn>);
    }
    uv::free_poll_handle(handle);
}

unsafe extern "C" fn on_timer_closed(handle: Handle) {
    if let Some(uv) = uv::uv() {
        Rc::decrement_strong_count((uv.handle_get_data)(handle) as *const RefCell<Conn>);
    }
    uv::free_timer_handle(handle);
}

/// A DNS request's data: the connection and the attempt it is for.
struct Resolving {
    conn: *const RefCell<Conn>,
    attempt: u64,
}

unsafe extern "C" fn on_resolved(req: Handle, status: c_int, res: *mut libc::addrinfo) {
    let Some(uv) = uv::uv() else { return };
    let data = Box::from_raw((uv.req_get_data)(req).cast::<Resolving>());
    uv::free_getaddrinfo_req(uv, req);
    let this = Rc::from_raw(data.conn);
    let addrs = if status < 0 {
        Err(format!(
            "could not resolve {} ({}): is the host name in the URL right?",
            this.borrow().settings.host,
            uv::error_text(uv, status)
        ))
    } else {
        Ok(socket_addrs(res))
    };
    if !res.is_null() {
        (uv.freeaddrinfo)(res);
    }
    let current = {
        let c = this.borrow();
        c.attempt == data.attempt && c.state == State::Connecting && !c.closed
    };
    if current {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            in_callback(this, |c| c.resolved(addrs))
        }));
    }
}

/// The IPv4 and IPv6 addresses of a getaddrinfo answer, in its order.
unsafe fn socket_addrs(mut ai: *mut libc::addrinfo) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    while !ai.is_null() {
        let a = &*ai;
        match a.ai_family {
            libc::AF_INET if !a.ai_addr.is_null() => {
                let sa = &*(a.ai_addr as *const libc::sockaddr_in);
                out.push(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)),
                    u16::from_be(sa.sin_port),
                )));
            }
            libc::AF_INET6 if !a.ai_addr.is_null() => {
                let sa = &*(a.ai_addr as *const libc::sockaddr_in6);
                out.push(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sa.sin6_addr.s6_addr),
                    u16::from_be(sa.sin6_port),
                    sa.sin6_flowinfo,
                    sa.sin6_scope_id,
                )));
            }
            _ => {}
        }
        ai = a.ai_next;
    }
    out
}
