//! A small pool of connections, each with the store's statements prepared once. Calls
//! take connections in turn; tokio-postgres pipelines concurrent statements on one
//! connection, so many calls in flight share a few sockets. A connection that broke (the
//! server restarted, the network dropped) is replaced on its next turn.
//!
//! Time bounds: every round trip, connecting included, runs under `connectTimeoutMs +
//! commandTimeoutMs`, so an unreachable or hung server is an error within that time.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, OnceCell};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::sql::{PostgresSql, Table, SCHEMA_VERSION};
use super::target::Target;
use crate::failure::{StoreFailure, StoreResult};

/// A connection's driver, as tokio-postgres returns it for our TLS connector.
pub type RawConnection = tokio_postgres::Connection<
    tokio_postgres::Socket,
    <MakeRustlsConnect as tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>>::Stream,
>;

/// The prepared statements of one connection.
pub struct Prepared {
    pub acquire: Statement,
    pub settle: Statement,
    pub renew: Statement,
    pub release: Statement,
    pub get: Statement,
    pub list: Statement,
    pub prune: Statement,
    pub clear: Statement,
    pub watch: Statement,
}

pub struct Session {
    pub client: Client,
    pub st: Prepared,
    /// Statements of ours in flight on this connection.
    busy: AtomicUsize,
}

pub struct Pool {
    pub target: Target,
    pub table: Table,
    pub sql: PostgresSql,
    tls: MakeRustlsConnect,
    slots: Vec<Mutex<Option<Arc<Session>>>>,
    next: AtomicUsize,
    schema: OnceCell<()>,
    /// False: the table must exist (made by `migrate`); never create it on first use.
    create: bool,
    closed: AtomicBool,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
}

/// Counts a statement in flight on a session while it lives (dropped with the statement,
/// whether it finished, failed or was abandoned at the deadline).
struct Busy(Arc<Session>);

impl Busy {
    fn on(session: &Arc<Session>) -> Self {
        session.busy.fetch_add(1, Ordering::Relaxed);
        Busy(session.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A driver error as one line: the server's message and SQLSTATE, or the I/O cause.
pub fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    if text.contains("Connection refused") {
        text.push_str(" (is the server running?)");
    }
    text
}

impl Pool {
    pub fn new(
        target: Target,
        table: Table,
        size: usize,
        connect_timeout: Duration,
        command_timeout: Duration,
        create: bool,
    ) -> StoreResult<Self> {
        let tls = target.connector()?;
        let mut target = target;
        target.config.connect_timeout(connect_timeout);
        let sql = PostgresSql::for_table(&table);
        Ok(Pool {
            target,
            table,
            sql,
            tls,
            slots: (0..size.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            schema: OnceCell::new(),
            create,
            closed: AtomicBool::new(false),
            connect_timeout,
            command_timeout,
        })
    }

    pub fn deadline(&self) -> Duration {
        self.connect_timeout + self.command_timeout
    }

    pub fn fail(&self, what: &str, e: &tokio_postgres::Error) -> StoreFailure {
        self.target.failure(what, describe(e))
    }

    /// A new connection and its driver (which the caller must poll).
    pub async fn connect_raw(&self) -> Result<(Client, RawConnection), tokio_postgres::Error> {
        self.target.config.connect(self.tls.clone()).await
    }

    /// A new connection, its driver task spawned (it ends when the connection does), with
    /// the store's session settings (sql/session.sql) made before anything else runs on it:
    /// the table's check and creation too, which a serializable default breaks.
    pub async fn connect(&self, what: &str) -> StoreResult<Client> {
        let (client, connection) = self
            .target
            .config
            .connect(self.tls.clone())
            .await
            .map_err(|e| self.fail(what, &e))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
            .batch_execute(&self.sql.session)
            .await
            .map_err(|e| self.fail(what, &e))?;
        Ok(client)
    }

    async fn open_session(&self, what: &str) -> StoreResult<Session> {
        let client = self.connect(what).await?;
        self.schema
            .get_or_try_init(|| self.ensure_schema(&client, what, self.create))
            .await?;
        // Prepared together: tokio-postgres pipelines them, so this is one round trip.
        let s = &self.sql;
        let c = &client;
        let (acquire, settle, renew, release, get, list, prune, clear, watch) = tokio::join!(
            c.prepare(&s.acquire),
            c.prepare(&s.settle),
            c.prepare(&s.renew),
            c.prepare(&s.release),
            c.prepare(&s.get),
            c.prepare(&s.list),
            c.prepare(&s.prune),
            c.prepare(&s.clear),
            c.prepare(&s.watch),
        );
        let fail = |e: tokio_postgres::Error| self.fail(what, &e);
        let st = Prepared {
            acquire: acquire.map_err(fail)?,
            settle: settle.map_err(fail)?,
            renew: renew.map_err(fail)?,
            release: release.map_err(fail)?,
            get: get.map_err(fail)?,
            list: list.map_err(fail)?,
            prune: prune.map_err(fail)?,
            clear: clear.map_err(fail)?,
            watch: watch.map_err(fail)?,
        };
        Ok(Session {
            client,
            st,
            busy: AtomicUsize::new(0),
        })
    }

    /// Checks the table's schema version; creates the table when it is missing and
    /// `create` is set (and the role may), else says how to create it.
    pub async fn ensure_schema(
        &self,
        client: &Client,
        what: &str,
        create: bool,
    ) -> StoreResult<()> {
        let row = client
            .query_one(self.sql.version_query.as_str(), &[&self.table.quoted])
            .await
            .map_err(|e| self.fail(what, &e))?;
        let present: bool = row.get(0);
        let comment: Option<String> = row.get(1);
        if present {
            return match comment.as_deref() {
                Some(SCHEMA_VERSION) => Ok(()),
                Some(c) if c.starts_with("idempotent-tools records, schema ") => Err(self.target.failure(
                    what,
                    format!(
                        "table {} has {c:?}, this version of idempotent-tools reads {SCHEMA_VERSION:?}: \
                         upgrade idempotent-tools, or use another table",
                        self.table.name
                    ),
                )),
                _ => Err(self.target.failure(
                    what,
                    format!(
                        "table {} exists but is not an idempotent-tools table (its comment is not \
                         {SCHEMA_VERSION:?}): pick another table with the table option",
                        self.table.name
                    ),
                )),
            };
        }
        if !create {
            return Err(self.target.failure(
                what,
                format!(
                    "table {} does not exist (nothing recorded there yet; create it with \
                     `idempotent-tools --postgres URL --table {} migrate`)",
                    self.table.name, self.table.name
                ),
            ));
        }
        self.create_table(client, what).await
    }

    /// Creates the table, once even when many processes start at the same moment.
    pub async fn create_table(&self, client: &Client, what: &str) -> StoreResult<()> {
        let lock = format!(
            "SELECT pg_advisory_xact_lock(hashtext('{}'))",
            self.table.quoted
        );
        let script = format!("BEGIN; {lock}; {} COMMIT;", self.sql.schema);
        match client.batch_execute(&script).await {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK").await;
                let hint = match e.code() {
                    Some(c) if *c == SqlState::INSUFFICIENT_PRIVILEGE => format!(
                        "; this role may not create table {}: run `idempotent-tools --postgres URL --table {} migrate` \
                         once as a role that may (see the README's least-privilege role)",
                        self.table.name, self.table.name
                    ),
                    Some(c) if *c == SqlState::INVALID_SCHEMA_NAME => {
                        format!("; create the schema of table {} first", self.table.name)
                    }
                    _ => String::new(),
                };
                Err(self.target.failure(
                    what,
                    format!(
                        "cannot create table {}: {}{hint}",
                        self.table.name,
                        describe(&e)
                    ),
                ))
            }
        }
    }

    /// A connection in working order, and its slot. A call takes the first open
    /// connection with nothing of ours in flight, so calls one at a time keep to one
    /// server backend (whose caches stay warm) instead of waking each in turn; when every
    /// one is busy, calls take the slots in turn (tokio-postgres pipelines them). While a
    /// slot's connection is still to be opened (or re-opened after it broke), calls use
    /// one that is open and the slot is opened in the background, so only the very first
    /// call (or the first after an outage) waits for a connection.
    async fn session(self: &Arc<Self>, what: &str) -> StoreResult<(usize, Arc<Session>)> {
        if self.closed.load(Ordering::Acquire) {
            return Err(self.target.failure(what, "the store is closed"));
        }
        let n = self.slots.len();
        let open = |j: usize| {
            self.slots[j]
                .try_lock()
                .ok()
                .and_then(|slot| slot.as_ref().filter(|s| !s.client.is_closed()).cloned())
        };
        if let Some((j, s)) = (0..n).find_map(|j| {
            open(j)
                .filter(|s| s.busy.load(Ordering::Relaxed) == 0)
                .map(|s| (j, s))
        }) {
            return Ok((j, s));
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % n;
        if let Some(s) = open(i) {
            return Ok((i, s));
        }
        if let Some((j, s)) = (1..n)
            .map(|d| (i + d) % n)
            .find_map(|j| open(j).map(|s| (j, s)))
        {
            let pool = self.clone();
            tokio::spawn(async move {
                let _ = pool.open_slot(i, "PostgreSQL connect failed").await;
            });
            return Ok((j, s));
        }
        Ok((i, self.open_slot(i, what).await?))
    }

    /// The slot's connection, opened now if it has none or a broken one.
    async fn open_slot(&self, i: usize, what: &str) -> StoreResult<Arc<Session>> {
        let mut slot = self.slots[i].lock().await;
        if let Some(s) = slot.as_ref().filter(|s| !s.client.is_closed()) {
            return Ok(s.clone());
        }
        *slot = None;
        if self.closed.load(Ordering::Acquire) {
            return Err(self.target.failure(what, "the store is closed"));
        }
        let session = Arc::new(self.open_session(what).await?);
        *slot = Some(session.clone());
        Ok(session)
    }

    /// Forgets a connection that did not answer in time (a hung server or network), so
    /// the next call on its slot opens a new one.
    async fn discard(&self, i: usize, session: &Arc<Session>) {
        let mut slot = self.slots[i].lock().await;
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
            slot.take();
        }
    }

    /// Runs one round trip on a pooled connection, under the deadline. Nothing is resent:
    /// whether a statement whose reply was lost took effect is unknown, so the caller gets
    /// a `StoreError` (a settle sent again is recognised by its token).
    pub async fn run<T, F, Fut>(self: &Arc<Self>, what: &str, op: F) -> StoreResult<T>
    where
        F: FnOnce(Arc<Session>) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let mut used = None;
        let attempt = async {
            let (i, session) = self.session(what).await?;
            used = Some((i, session.clone()));
            let _busy = Busy::on(&session);
            op(session).await.map_err(|e| self.fail(what, &e))
        };
        let outcome = tokio::time::timeout(self.deadline(), attempt).await;
        match outcome {
            Ok(outcome) => outcome,
            Err(_) => {
                if let Some((i, session)) = used.take() {
                    self.discard(i, &session).await;
                }
                Err(self.target.failure(
                    what,
                    format!(
                        "no answer within {} ms (connect timeout {} ms + command timeout {} ms)",
                        self.deadline().as_millis(),
                        self.connect_timeout.as_millis(),
                        self.command_timeout.as_millis()
                    ),
                ))
            }
        }
    }

    pub async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for slot in &self.slots {
            slot.lock().await.take();
        }
    }
}
