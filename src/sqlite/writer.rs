//! The single writer thread of a store: every write of this process goes through it.
//!
//! Jobs that arrive while a transaction is being committed are committed together in
//! the next one (group commit): with `synchronous = FULL`, 64 concurrent calls cost a
//! handful of fsyncs instead of 64. Each job runs inside its own savepoint, so one job's
//! failure rolls back only its own statements. A job's answer is sent only after the
//! COMMIT has returned, so no caller hears of a write that is not yet durable; the
//! batch's answers then go out together (`Flush`: see `replies.rs`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use rusqlite::Connection;

use super::batch::run as run_sql;
use super::open::{FileId, StoreFile};
use super::retention::Retention;
use crate::failure::{StoreFailure, StoreResult};

/// At most this many jobs share one transaction, so one commit never grows unbounded.
const MAX_BATCH: usize = 256;

trait Job: Send {
    /// Runs the job's statements; false when they failed (and must be rolled back).
    fn run(&mut self, conn: &Connection) -> bool;
    /// Why `run` failed, if it did.
    fn failure(&self) -> Option<StoreFailure>;
    /// Answers the caller, once the fate of the transaction is known.
    fn settle(self: Box<Self>, commit: StoreResult<()>);
}

/// Where a job's answer goes: to its JavaScript promise's queue (see `replies.rs`), so no
/// other thread stands between the commit and the caller.
pub type Reply<T> = Box<dyn FnOnce(StoreResult<T>) + Send>;

/// Sends the answers given so far to JavaScript; called once per batch.
pub type Flush = Arc<dyn Fn() + Send + Sync>;

struct Task<T, F> {
    work: Option<F>,
    outcome: Option<StoreResult<T>>,
    reply: Reply<T>,
}

impl<T: Send, F: FnOnce(&Connection) -> StoreResult<T> + Send> Job for Task<T, F> {
    fn run(&mut self, conn: &Connection) -> bool {
        let work = self.work.take().expect("a job runs once");
        let outcome = catch_unwind(AssertUnwindSafe(|| work(conn)))
            .unwrap_or_else(|p| Err(StoreFailure::from_panic(p)));
        let ok = outcome.is_ok();
        self.outcome = Some(outcome);
        ok
    }

    fn failure(&self) -> Option<StoreFailure> {
        self.outcome.as_ref()?.as_ref().err().cloned()
    }

    fn settle(self: Box<Self>, commit: StoreResult<()>) {
        let answer = match commit {
            Ok(()) => self
                .outcome
                .unwrap_or_else(|| Err(StoreFailure::new("the job did not run"))),
            Err(e) => Err(e),
        };
        (self.reply)(answer);
    }
}

pub struct Writer {
    queue: Mutex<Option<mpsc::Sender<Box<dyn Job>>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    flush: Flush,
}

impl Writer {
    /// Starts the thread on an open connection to `file`. `generation` is bumped
    /// whenever the thread has to reopen the file, so readers know to reopen too.
    pub fn start(
        file: Arc<StoreFile>,
        opened: (Connection, Option<FileId>),
        generation: Arc<AtomicU64>,
        describe: impl Fn(rusqlite::Error) -> StoreFailure + Send + 'static,
        flush: Flush,
        retention: Retention,
    ) -> StoreResult<Self> {
        let (queue, jobs) = mpsc::channel::<Box<dyn Job>>();
        let batch_done = flush.clone();
        let thread = std::thread::Builder::new()
            .name("idempotent-tools-sqlite-writer".into())
            .spawn(move || {
                run(
                    &file,
                    opened,
                    &generation,
                    jobs,
                    describe,
                    &*batch_done,
                    &retention,
                )
            })
            .map_err(|e| {
                StoreFailure::new(format!("cannot start the store's writer thread: {e}"))
            })?;
        Ok(Writer {
            queue: Mutex::new(Some(queue)),
            thread: Mutex::new(Some(thread)),
            flush,
        })
    }

    /// Queues `work` to run inside a write transaction; `reply` gets its outcome after the
    /// commit (or at once, if the store is closed).
    pub fn submit<T, F>(&self, work: F, reply: Reply<T>)
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let queue = match self.queue.lock() {
            Ok(queue) => queue.clone(),
            Err(_) => None,
        };
        let Some(queue) = queue else {
            reply(Err(StoreFailure::new("the store is closed")));
            return (self.flush)();
        };
        if let Err(mpsc::SendError(task)) = queue.send(Box::new(Task {
            work: Some(work),
            outcome: None,
            reply,
        })) {
            task.settle(Err(StoreFailure::new("the store is closed")));
            (self.flush)();
        }
    }

    /// Stops accepting jobs, lets the queued ones finish, and waits for the thread.
    pub fn stop(&self) {
        if let Ok(mut queue) = self.queue.lock() {
            queue.take();
        }
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

fn run(
    file: &StoreFile,
    opened: (Connection, Option<FileId>),
    generation: &AtomicU64,
    jobs: mpsc::Receiver<Box<dyn Job>>,
    describe: impl Fn(rusqlite::Error) -> StoreFailure,
    flush: &(dyn Fn() + Send + Sync),
    retention: &Retention,
) {
    let (mut conn, mut id) = opened;
    // Pruning (see `retention.rs`) runs between batches: when the queue has been quiet
    // until the next pass is due, or after a batch once it is.
    let mut next_prune = Instant::now() + retention.interval;
    let prune = |conn: &Connection, id: Option<FileId>| {
        let started = Instant::now();
        // Only on the file at the path (a replaced one is reopened by the next batch).
        let more = id.is_some() && file.identity() == id && retention.pass(conn);
        if more {
            // The next pass waits as long as this one took: SQLite's lock has no queue, and
            // another process waiting for it only polls, so passes back to back would now
            // and then keep it out past its busy timeout. This process's jobs run meanwhile.
            Instant::now() + started.elapsed()
        } else {
            Instant::now() + retention.interval
        }
    };
    loop {
        let first = match jobs.recv_timeout(next_prune.saturating_duration_since(Instant::now())) {
            Ok(job) => job,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                next_prune = prune(&conn, id);
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        // An open connection keeps writing to a file that was deleted or replaced, where
        // no other process will ever look: records would silently go nowhere. One stat
        // per batch notices; the file is then opened (and created) again at its path.
        if id.is_none() || file.identity() != id {
            match file.open_writer() {
                Ok((fresh, fresh_id)) => {
                    conn = fresh;
                    id = fresh_id;
                    generation.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => {
                    for job in batch {
                        job.settle(Err(e.clone()));
                    }
                    flush();
                    continue;
                }
            }
        }
        let commit = commit_batch(&conn, &mut batch, &describe);
        for job in batch {
            job.settle(commit.clone());
        }
        flush();
        if Instant::now() >= next_prune {
            next_prune = prune(&conn, id);
        }
    }
}

fn commit_batch(
    conn: &Connection,
    batch: &mut [Box<dyn Job>],
    describe: impl Fn(rusqlite::Error) -> StoreFailure,
) -> StoreResult<()> {
    run_sql(conn, "BEGIN IMMEDIATE").map_err(&describe)?;
    let ran = (|| {
        for job in batch.iter_mut() {
            run_sql(conn, "SAVEPOINT job").map_err(&describe)?;
            if job.run(conn) {
                run_sql(conn, "RELEASE job").map_err(&describe)?;
            } else if conn.is_autocommit() {
                // Some errors (a full disk, an I/O error) make SQLite roll back the whole
                // transaction itself: every job's work in it is gone, and the job's own
                // error is the cause the whole batch fails with.
                return Err(job
                    .failure()
                    .unwrap_or_else(|| StoreFailure::new("the transaction was rolled back")));
            } else {
                run_sql(conn, "ROLLBACK TO job").map_err(&describe)?;
                run_sql(conn, "RELEASE job").map_err(&describe)?;
            }
        }
        run_sql(conn, "COMMIT").map_err(&describe)
    })();
    if ran.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    ran
}
