//! Opening a store file: private permissions, WAL, and a schema that identifies it.
//!
//! Several processes may open a brand-new file at the same moment. Switching to WAL can
//! return SQLITE_BUSY even with a busy timeout (the switch does not call the busy
//! handler), so every step here is retried on BUSY until the busy timeout runs out, and
//! the schema is created inside `BEGIN IMMEDIATE` after checking again that no other
//! process has created it first.

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::permissions;
use super::schema::{migrate, SCHEMA, SCHEMA_VERSION};
use crate::failure::{StoreFailure, StoreResult};

/// `PRAGMA application_id` of every store file ("IDTP"): a file without it is not ours.
pub const APPLICATION_ID: i32 = 0x4944_5450;

#[derive(Clone, Copy, Debug)]
pub enum Durability {
    /// `synchronous = FULL`: every commit is fsynced; survives power loss.
    Full,
    /// `synchronous = NORMAL`: survives a process crash; a power cut can lose the last
    /// commits.
    Normal,
}

impl Durability {
    pub fn parse(text: Option<&str>) -> StoreResult<Self> {
        match text {
            None | Some("full") => Ok(Durability::Full),
            Some("normal") => Ok(Durability::Normal),
            Some(other) => Err(StoreFailure::new(format!(
                "unknown durability {other:?}: use 'full' (the default) or 'normal'"
            ))),
        }
    }

    fn pragma(self) -> &'static str {
        match self {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Settings {
    pub durability: Durability,
    pub busy_timeout: Duration,
}

/// The store file and how to open it; kept so that connections can be reopened when the
/// file is removed or replaced while in use (see `writer.rs`).
pub struct StoreFile {
    pub path: std::path::PathBuf,
    pub settings: Settings,
}

/// Which file a path named when it was opened (device and inode on Unix).
pub type FileId = (u64, u64);

impl StoreFile {
    pub fn label(&self) -> String {
        self.path.display().to_string()
    }

    /// Creates the file if needed and opens the connection that writes.
    pub fn open_writer(&self) -> StoreResult<(Connection, Option<FileId>)> {
        prepare_path(&self.path)?;
        let conn = connect(&self.path, &self.settings)?;
        initialize(&conn, &self.path, &self.settings)?;
        Ok((conn, self.identity()))
    }

    /// A connection for reads; `busy_timeout` zero for the synchronous peek. Its page
    /// cache is larger than SQLite's 2 MiB default, so that a replay in a store of a
    /// million records seldom leaves it. (Not mmap: a memory-mapped file that shrinks or
    /// fails under it would kill the process with SIGBUS.)
    pub fn open_reader(&self, busy_timeout: Duration) -> StoreResult<Connection> {
        let conn = connect(
            &self.path,
            &Settings {
                busy_timeout,
                ..self.settings.clone()
            },
        )?;
        conn.pragma_update(None, "cache_size", -32_768)
            .map_err(|e| failure(&self.path, describe(e)))?;
        Ok(conn)
    }

    /// The identity of the file now at the path; `None` if there is none.
    #[cfg(unix)]
    pub fn identity(&self) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()))
    }

    #[cfg(not(unix))]
    pub fn identity(&self) -> Option<FileId> {
        std::fs::metadata(&self.path).ok().map(|_| (0, 0))
    }
}

fn failure(path: &Path, cause: impl std::fmt::Display) -> StoreFailure {
    StoreFailure::at(&path.display().to_string(), "cannot open the store", cause)
}

fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Runs `step`, retrying while it fails with BUSY and the deadline has not passed.
fn retry_busy<T>(
    deadline: Instant,
    mut step: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    loop {
        match step() {
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(5))
            }
            other => return other,
        }
    }
}

/// Creates missing folders with mode 0700 and the file with mode 0600, before SQLite
/// sees the path (SQLite would create it with the process umask; it creates the -wal
/// and -shm files with the database file's own mode). Files found loose are tightened
/// when they are ours and refused when they are not (see `permissions.rs`).
pub fn prepare_path(path: &Path) -> StoreResult<()> {
    refuse_special_files(path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            create_private_dirs(dir)
                .map_err(|e| failure(path, format!("cannot create its folder: {e}")))?;
        }
    }
    create_private_file(path).map_err(|e| failure(path, e))?;
    permissions::secure_existing(path)
}

#[cfg(unix)]
fn create_private_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // The umask may have removed bits from 0700 but never adds any; set it exactly.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

#[cfg(not(unix))]
fn create_private_dirs(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn create_private_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn create_private_file(path: &Path) -> std::io::Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Refuses a path (or its `-wal`, `-shm` or `-journal` file) that holds anything but a
/// regular file: opening a FIFO waits for a writer forever (whoever owns it), and a device
/// or socket is no place for records. A missing file is fine (it is created); symlinks are
/// followed, so a link to a store file works and a link to a FIFO is refused.
pub fn refuse_special_files(path: &Path) -> StoreResult<()> {
    for file in std::iter::once(path.to_path_buf()).chain(permissions::companions(path)) {
        let kind = match std::fs::metadata(&file) {
            Ok(meta) if meta.is_file() => continue,
            Ok(meta) => kind_of(&meta.file_type()),
            Err(_) => continue, // missing, or unreadable: creating or opening it says why
        };
        return Err(failure(
            path,
            format!(
                "{} is {kind}, not a regular file; a store must be a regular file (or a path \
                 where nothing exists yet): remove it, or point the store at another file",
                file.display()
            ),
        ));
    }
    Ok(())
}

fn kind_of(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
    }
    if kind.is_dir() {
        "a folder"
    } else {
        "a special file"
    }
}

/// Opens one connection to an existing store file and applies the per-connection settings.
pub fn connect(path: &Path, settings: &Settings) -> StoreResult<Connection> {
    refuse_special_files(path)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| failure(path, e))?;
    conn.busy_timeout(settings.busy_timeout)
        .map_err(|e| failure(path, e))?;
    let deadline = Instant::now() + settings.busy_timeout;
    retry_busy(deadline, || {
        conn.pragma_update(None, "synchronous", settings.durability.pragma())
    })
    .map_err(|e| failure(path, describe(e)))?;
    Ok(conn)
}

/// Makes sure the file at `path` is this store's database in WAL mode, creating the
/// schema in a new file. Refuses a foreign or corrupt file without changing it.
pub fn initialize(conn: &Connection, path: &Path, settings: &Settings) -> StoreResult<()> {
    let deadline = Instant::now() + settings.busy_timeout;
    let fail = |e: rusqlite::Error| failure(path, describe(e));

    let (app_id, tables) = retry_busy(deadline, || identify(conn)).map_err(fail)?;
    check_identity(path, app_id, tables, conn)?;

    retry_busy(deadline, || {
        let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
        if mode.eq_ignore_ascii_case("wal") {
            return Ok(mode);
        }
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
    })
    .map_err(fail)
    .and_then(|mode| {
        if mode.eq_ignore_ascii_case("wal") {
            Ok(())
        } else {
            Err(failure(
                path,
                format!("the file system does not support WAL mode (journal mode stays {mode})"),
            ))
        }
    })?;

    if app_id != APPLICATION_ID {
        retry_busy(deadline, || create_schema(conn)).map_err(fail)?;
        // Another process may have created it meanwhile; `create_schema` left it alone then.
        let (app_id, tables) = retry_busy(deadline, || identify(conn)).map_err(fail)?;
        check_identity(path, app_id, tables, conn)?;
    }
    retry_busy(deadline, || upgrade(conn)).map_err(fail)
}

/// Migrates a file written by an older version in place (see `schema.rs`), in one
/// `BEGIN IMMEDIATE` that checks the version again: of processes racing to open an old
/// file, one migrates and the others find it done.
fn upgrade(conn: &Connection) -> rusqlite::Result<()> {
    let version =
        |conn: &Connection| conn.pragma_query_value(None, "user_version", |r| r.get::<_, i32>(0));
    if version(conn)? >= SCHEMA_VERSION {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let migrated = (|| {
        let from = version(conn)?;
        if from < SCHEMA_VERSION {
            migrate(conn, from)?;
        }
        Ok(())
    })();
    match migrated {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// The file's application id and how many schema objects it has, read in ONE read
/// transaction: two separate reads could see another process's schema creation half
/// (the id before its commit, the tables after) and take our own store for a foreign one.
fn identify(conn: &Connection) -> rusqlite::Result<(i32, i64)> {
    let in_transaction = !conn.is_autocommit();
    if !in_transaction {
        conn.execute_batch("BEGIN DEFERRED")?;
    }
    let read = (|| {
        let app_id: i32 = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
        let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
        Ok((app_id, tables))
    })();
    if !in_transaction {
        let _ = conn.execute_batch("COMMIT");
    }
    read
}

fn check_identity(path: &Path, app_id: i32, tables: i64, conn: &Connection) -> StoreResult<()> {
    if app_id == APPLICATION_ID {
        let version: i32 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| failure(path, describe(e)))?;
        if version > SCHEMA_VERSION {
            return Err(failure(path, format!(
                "the file was written by a newer idempotent-tools (schema {version}, this one reads up to {SCHEMA_VERSION}); upgrade the package"
            )));
        }
        return Ok(());
    }
    if app_id != 0 || tables > 0 {
        return Err(failure(path, "the file is a SQLite database of some other program, not an idempotent-tools store; point the store at another file"));
    }
    Ok(())
}

fn create_schema(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let created = (|| {
        let (app_id, tables) = identify(conn)?;
        if app_id != 0 || tables > 0 {
            return Ok(()); // someone else's, or created by a racing process: checked after
        }
        conn.execute_batch(SCHEMA)?;
        conn.pragma_update(None, "application_id", APPLICATION_ID)?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        Ok(())
    })();
    match created {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// SQLite's message, with what to do for the errors a user can act on.
pub fn describe(err: rusqlite::Error) -> String {
    match err.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => {
            format!("{err}: the file is not an idempotent-tools store (or it is corrupt); point the store at another file or move this one away")
        }
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            format!("{err}: another process held the store's lock for longer than the busy timeout")
        }
        Some(ErrorCode::ReadOnly)
        | Some(ErrorCode::CannotOpen)
        | Some(ErrorCode::PermissionDenied) => {
            format!(
                "{err}: check that the file and its folder exist and are writable by this process"
            )
        }
        Some(ErrorCode::DiskFull) => format!("{err}: free some disk space"),
        _ => err.to_string(),
    }
}
