//! The Redis URL (parsed and validated without any I/O, shown only redacted) and the one
//! lazily opened, auto-reconnecting, multiplexed connection a store uses: to one server,
//! or (`cluster: true`) to a Redis Cluster, where the redis crate's cluster client routes
//! each command by its key's slot and follows MOVED and ASK redirects.
//!
//! Time bounds: every round trip runs under a deadline of `connectTimeoutMs +
//! commandTimeoutMs`, whatever the connection manager does inside it (its own connect
//! timeout, response timeout and bounded reconnect retries), so an unreachable, hung or
//! dying server is an error within that time, never a hang.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{
    Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo, Pipeline, RedisError,
    RedisFuture, RedisResult, ServerErrorKind, Value,
};

use crate::failure::{StoreFailure, StoreResult};

pub const DEFAULT_PREFIX: &str = "idempotent-tools:";
pub const DEFAULT_CONNECT_TIMEOUT_MS: f64 = 2000.0;
pub const DEFAULT_COMMAND_TIMEOUT_MS: f64 = 5000.0;
/// Reconnect attempts the connection manager makes after a failed connect, before it
/// reports the failure (a later call starts a new round of attempts).
const CONNECT_RETRIES: usize = 1;

/// The user's URL with any credential replaced by `***`, for labels and messages. Used for
/// a URL that did not parse: it over-redacts rather than risk showing a secret (everything
/// between `://` and the last `@` counts as credentials; query and fragment are dropped).
pub fn redact_raw(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return if url.contains('@') || url.contains(':') {
            "<a URL that is not shown>".into()
        } else {
            url.into()
        };
    };
    let (scheme, rest) = (&url[..scheme_end], &url[scheme_end + 3..]);
    let (userinfo, host_and_path) = match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let host_and_path = match host_and_path.find(['?', '#']) {
        Some(cut) => &host_and_path[..cut],
        None => host_and_path,
    };
    let credentials = match userinfo {
        None => String::new(),
        Some(info) => match info.split_once(':') {
            Some((user, _)) if !user.contains(['/', '?', '#']) => format!("{user}:***@"),
            _ => "***@".into(),
        },
    };
    format!("{scheme}://{credentials}{host_and_path}")
}

/// The label of a parsed URL: `scheme://[user:***@]host:port/db`.
fn label(scheme: &str, info: &ConnectionInfo) -> String {
    let redis = info.redis_settings();
    let credentials = match (redis.username(), redis.password()) {
        (Some(user), Some(_)) => format!("{user}:***@"),
        (None, Some(_)) => ":***@".into(),
        // A user without a password may be a password written as a user: hide it.
        (Some(_), None) => "***@".into(),
        (None, None) => String::new(),
    };
    let (host, port) = match info.addr() {
        ConnectionAddr::Tcp(host, port) => (host.as_str(), *port),
        ConnectionAddr::TcpTls { host, port, .. } => (host.as_str(), *port),
        _ => ("?", 0),
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    format!("{scheme}://{credentials}{host}:{port}/{}", redis.db())
}

/// A validated Redis URL: what to connect to, and how to name it in messages.
#[derive(Clone)]
pub struct Target {
    pub info: ConnectionInfo,
    /// The redacted URL.
    pub label: String,
    password: Option<String>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

impl Target {
    pub fn parse(url: &str) -> StoreResult<Self> {
        let raw_label = redact_raw(url.trim());
        let bad = |why: &str| StoreFailure::new(format!("invalid Redis URL ({raw_label}): {why}"));
        let url = url.trim();
        let scheme = match url.find("://") {
            Some(i) => url[..i].to_ascii_lowercase(),
            None => {
                return Err(bad(
                    "expected redis://host:port/db or rediss://host:port/db",
                ))
            }
        };
        if !matches!(scheme.as_str(), "redis" | "rediss" | "valkey" | "valkeys") {
            return Err(bad(&format!(
                "unsupported scheme '{scheme}': use redis:// or rediss:// (TLS), or valkey:// or valkeys://"
            )));
        }
        if let Some(hash) = url.rfind('#') {
            if !url[hash..].contains('@') {
                return Err(bad("a URL fragment (such as #insecure) is not supported"));
            }
        }
        // The redis crate's own messages never repeat the URL or its password.
        let info = url
            .into_connection_info()
            .map_err(|e| bad(&e.to_string()))?;
        if !matches!(
            info.addr(),
            ConnectionAddr::Tcp(..) | ConnectionAddr::TcpTls { .. }
        ) {
            return Err(bad("only TCP addresses are supported"));
        }
        let label = label(&scheme, &info);
        let password = info.redis_settings().password().map(str::to_string);
        Ok(Target {
            info,
            label,
            password,
        })
    }

    /// Builds a failure message naming the redacted URL; as a last guard, scrubs the
    /// password should a server or library message ever echo it.
    pub fn failure(&self, what: &str, cause: impl std::fmt::Display) -> StoreFailure {
        let mut message = format!("{what} ({}): {cause}", self.label);
        if let Some(pw) = self.password.as_deref().filter(|p| p.len() >= 4) {
            message = message.replace(pw, "***");
        }
        StoreFailure::new(message)
    }
}

/// Milliseconds from JavaScript as a duration; `None` means the default.
pub fn timeout_option(name: &str, value: Option<f64>, default: f64) -> StoreResult<Duration> {
    let ms = value.unwrap_or(default);
    if !ms.is_finite() || ms <= 0.0 {
        return Err(StoreFailure::new(format!(
            "{name} must be a positive, finite number of milliseconds, got {ms}"
        )));
    }
    Ok(Duration::from_millis(
        ms.ceil().min(24.0 * 3600.0 * 1000.0) as u64
    ))
}

/// rediss:// uses rustls with the `ring` provider; the redis crate builds its TLS config
/// from the process-wide default provider, so make sure there is one (an application that
/// installed its own first keeps it).
fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// What a store's round trips go through: one server's multiplexed connection, or a
/// cluster connection (one multiplexed connection per node, routed by slot).
#[derive(Clone)]
pub enum Handle {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Handle {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Handle::Single(c) => c.req_packed_command(cmd),
            Handle::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Handle::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Handle::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Handle::Single(c) => c.get_db(),
            Handle::Cluster(c) => c.get_db(),
        }
    }
}

impl Handle {
    /// Sends `cmd` to the node at `addr` (cluster) or to the one server.
    pub async fn on_node(&mut self, addr: Option<&NodeAddr>, cmd: Cmd) -> RedisResult<Value> {
        match (self, addr) {
            (Handle::Cluster(c), Some((host, port))) => {
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                c.route_command(cmd, route).await
            }
            (h, _) => cmd.query_async(h).await,
        }
    }
}

/// A cluster node's host and port.
pub type NodeAddr = (String, u16);

enum Kind {
    Single {
        client: redis::Client,
        config: ConnectionManagerConfig,
        manager: Mutex<Option<ConnectionManager>>,
    },
    Cluster {
        client: ClusterClient,
        /// Connecting to a cluster is async (it reads the slot map first).
        conn: tokio::sync::Mutex<Option<ClusterConnection>>,
    },
}

/// One store's connection, created on first use: a `ConnectionManager` (one multiplexed
/// socket, so concurrent calls pipeline over it; reconnects after the server drops it),
/// or a cluster connection (which refreshes its slot map after MOVED and failovers).
pub struct Conn {
    pub target: Target,
    kind: Kind,
    closed: AtomicBool,
    connect_timeout: Duration,
    command_timeout: Duration,
}

impl Conn {
    /// No I/O: the connection opens on the first call.
    pub fn new(
        target: Target,
        cluster: bool,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> StoreResult<Self> {
        install_tls_provider();
        let mut info = target.info.clone();
        let redis_settings = info
            .redis_settings()
            .clone()
            .set_lib_name("idempotent-tools", env!("CARGO_PKG_VERSION"));
        info = info.set_redis_settings(redis_settings);
        let kind = if cluster {
            if info.redis_settings().db() != 0 {
                return Err(target.failure(
                    "invalid Redis URL",
                    "a Redis Cluster has only database 0: drop the /db part of the URL",
                ));
            }
            let client = ClusterClient::builder(vec![info])
                .connection_timeout(connect_timeout)
                .response_timeout(command_timeout)
                .build()
                .map_err(|e| target.failure("invalid Redis URL", e))?;
            Kind::Cluster {
                client,
                conn: tokio::sync::Mutex::new(None),
            }
        } else {
            let client =
                redis::Client::open(info).map_err(|e| target.failure("invalid Redis URL", e))?;
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(connect_timeout))
                .set_response_timeout(Some(command_timeout))
                .set_number_of_retries(CONNECT_RETRIES)
                .set_min_delay(Duration::from_millis(50))
                .set_max_delay(Duration::from_millis(500));
            Kind::Single {
                client,
                config,
                manager: Mutex::new(None),
            }
        };
        Ok(Conn {
            target,
            kind,
            closed: AtomicBool::new(false),
            connect_timeout,
            command_timeout,
        })
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster { .. })
    }

    async fn handle(&self, what: &str) -> StoreResult<Handle> {
        if self.closed.load(Ordering::Acquire) {
            return Err(self.target.failure(what, "the store is closed"));
        }
        match &self.kind {
            Kind::Single {
                client,
                config,
                manager,
            } => {
                let mut slot = manager
                    .lock()
                    .map_err(|_| self.target.failure(what, "the store is closed"))?;
                if let Some(manager) = slot.as_ref() {
                    return Ok(Handle::Single(manager.clone()));
                }
                // Must run inside the Tokio runtime (it spawns the manager's background task).
                let manager =
                    ConnectionManager::new_lazy_with_config(client.clone(), config.clone())
                        .map_err(|e| self.target.failure(what, e))?;
                *slot = Some(manager.clone());
                Ok(Handle::Single(manager))
            }
            Kind::Cluster { client, conn } => {
                let mut slot = conn.lock().await;
                if let Some(c) = slot.as_ref() {
                    return Ok(Handle::Cluster(c.clone()));
                }
                let c = client
                    .get_async_connection()
                    .await
                    .map_err(|e| self.target.failure(what, self.describe(&e)))?;
                *slot = Some(c.clone());
                Ok(Handle::Cluster(c))
            }
        }
    }

    /// Drops the connection, so that the next call starts a new one.
    fn reset(&self) {
        match &self.kind {
            Kind::Single { manager, .. } => {
                if let Ok(mut slot) = manager.lock() {
                    slot.take();
                }
            }
            Kind::Cluster { conn, .. } => {
                if let Ok(mut slot) = conn.try_lock() {
                    slot.take();
                }
            }
        }
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.reset();
    }

    fn describe(&self, e: &RedisError) -> String {
        if e.is_timeout() {
            format!(
                "timed out (connect timeout {} ms, command timeout {} ms)",
                self.connect_timeout.as_millis(),
                self.command_timeout.as_millis()
            )
        } else if e.is_connection_refusal() {
            format!("connection refused, is the server running? ({e})")
        } else if e.to_string().contains("refused to switch database") {
            let db = self.target.info.redis_settings().db();
            refused_select(db, e.code(), e.detail().unwrap_or_default())
        } else if e.kind() == ErrorKind::AuthenticationFailed {
            refused_auth(
                e.detail()
                    .unwrap_or("the server refused the user name or password"),
            )
        } else if e.code() == Some("NOAUTH") {
            NEEDS_PASSWORD.to_string()
        } else if e.code() == Some("ERR") && too_old(e.detail().unwrap_or_default()) {
            format!("{e}{NEEDS}")
        } else {
            e.to_string()
        }
    }

    /// The connect and command timeouts.
    pub fn timeouts(&self) -> (Duration, Duration) {
        (self.connect_timeout, self.command_timeout)
    }

    /// The bound on one round trip, connecting included.
    pub fn deadline(&self) -> Duration {
        self.connect_timeout + self.command_timeout
    }

    /// Runs one round trip. When the connection turns out to have been dropped (the
    /// server restarted since the last call, say), the manager reconnects and the request
    /// is sent once more: every script is safe to resend (a resent acquire or settle
    /// recognises its own token), and so is every read.
    pub async fn run<T, F, Fut>(&self, what: &str, op: F) -> StoreResult<T>
    where
        F: Fn(Handle) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let attempt = async {
            let started = tokio::time::Instant::now();
            let mut outcome = op(self.handle(what).await?).await;
            if matches!(&outcome, Err(e) if resendable(e)) {
                outcome = op(self.handle(what).await?).await;
            }
            // A cluster whose nodes disagree for a moment about who serves a slot (a
            // migration that told the source before the target, a failover not yet
            // agreed) answers MOVED back and forth; the redis client follows 16
            // redirects at once and gives up within a millisecond. Such an answer means
            // the command did not run, so it is sent again after a pause, until the
            // nodes agree or the call's deadline (below) ends it.
            let mut pause = TRANSITION_PAUSE;
            while self.is_cluster() && matches!(&outcome, Err(e) if in_transition(e)) {
                // The last answer is what the caller gets, not "no answer", when the
                // nodes still disagree near the deadline.
                if started.elapsed() + pause * 2 >= self.deadline() {
                    break;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(TRANSITION_PAUSE_MAX);
                outcome = op(self.handle(what).await?).await;
            }
            outcome.map_err(|e| {
                if stuck(&e) {
                    self.reset();
                }
                let cause = self.describe(&e);
                if self.is_cluster() && in_transition(&e) {
                    let ms = started.elapsed().as_millis();
                    return self.target.failure(
                        what,
                        format!(
                            "the cluster turned the command away for {ms} ms ({cause}): its \
                             nodes are moving this key's slot or electing a primary. The \
                             command did not run; retry once the cluster is stable"
                        ),
                    );
                }
                self.target.failure(what, cause)
            })
        };
        match tokio::time::timeout(self.deadline(), attempt).await {
            Ok(outcome) => outcome,
            Err(_) => Err(self.target.failure(
                what,
                format!(
                    "no answer within {} ms (connect timeout {} ms + command timeout {} ms)",
                    self.deadline().as_millis(),
                    self.connect_timeout.as_millis(),
                    self.command_timeout.as_millis()
                ),
            )),
        }
    }
}

/// An error that the connection manager would repeat forever: it reconnects only after
/// I/O errors, so a failed connection setup (authentication refused, a database that
/// cannot be selected, a reply that is not RESP) would stick even after the server is
/// fixed. Command errors (`Server` kinds) are answers, not connection trouble.
fn stuck(e: &RedisError) -> bool {
    match e.kind() {
        ErrorKind::Io => false,
        ErrorKind::Server(_) => e.to_string().contains("refused to switch database"),
        _ => true,
    }
}

/// The first pause before a command a cluster in transition turned away is sent again;
/// each pause after it doubles, up to `TRANSITION_PAUSE_MAX`.
const TRANSITION_PAUSE: Duration = Duration::from_millis(5);
const TRANSITION_PAUSE_MAX: Duration = Duration::from_millis(200);

/// A cluster's answer that it did not run the command because its nodes are moving a
/// slot or electing a primary (MOVED or ASK left after the client's own redirects,
/// TRYAGAIN, CLUSTERDOWN): safe to send again, and likely to work once they agree.
fn in_transition(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
        )
    )
}

/// A dropped connection, not a refused one (the manager already retried those) nor a
/// timeout (the deadline is spent).
fn resendable(e: &RedisError) -> bool {
    e.is_connection_dropped() && !e.is_connection_refusal() && !e.is_timeout()
}

/// A connection's handshake refused its SELECT (`code` and `detail` of the error reply, when
/// known): what was refused and what to do. No command of a call is sent before the
/// handshake is answered (both transports), so a refusal leaves nothing on the server.
pub fn refused_select(db: i64, code: Option<&str>, detail: &str) -> String {
    if code == Some("NOPERM") || detail.contains("no permissions") {
        format!(
            "the server refused SELECT {db} (NOPERM: {detail}); no command was sent: grant the \
             URL's user +select (ACL SETUSER <user> +select), or use database 0 (drop /{db} \
             from the URL)"
        )
    } else {
        format!(
            "the server refused SELECT {db} ({detail}); no command was sent: use a database \
             the server has (its `databases` setting, 16 by default: /0 to /15)"
        )
    }
}

/// A connection's handshake refused its AUTH: what to do.
pub fn refused_auth(detail: &str) -> String {
    format!(
        "authentication failed ({detail}); no command was sent: check the user name and \
         password in the URL (redis://user:password@host:port)"
    )
}

/// The server wants a password the URL does not give.
pub const NEEDS_PASSWORD: &str = "the server needs a password (NOAUTH); no command was sent: \
     give it in the URL, as redis://:password@host:port (or redis://user:password@host:port \
     for an ACL user)";

/// What the store needs of the server, said when an older one refuses a command.
const NEEDS: &str = "; RedisStore needs Redis 7.0 or newer, or Valkey 7.2 or newer \
     (SET with NX and GET together, PEXPIRETIME)";

/// An older server's answer to a command or option it does not have.
fn too_old(detail: &str) -> bool {
    detail.contains("syntax error") || detail.contains("unknown command")
}

/// An error reply as a message, with what the store needs when an older server gave it.
pub fn explain(e: &redis::ServerError) -> String {
    if e.code() == "ERR" && too_old(e.details().unwrap_or_default()) {
        format!("{e}{NEEDS}")
    } else {
        e.to_string()
    }
}

/// `prefix` as a SCAN MATCH pattern that matches only keys starting with it.
pub fn match_pattern(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 2);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    pattern
}
