//! Keeping a store private when it already exists. New files and folders are created
//! 0600 and 0700 (see `open.rs`); a file found looser (made by an older version, copied,
//! restored from a backup, created by hand) would stay readable by other local users, and
//! SQLite would create its `-wal` and `-shm` files with the same loose mode. So on open:
//!
//! - the store file and its `-wal`, `-shm` and `-journal` files, when group or others have
//!   any access: tightened to 0600 if this process's user owns them; otherwise refused,
//!   since only the owner can fix them;
//! - the store's folder, when it is ours, loose, and holds nothing but this store's files
//!   (a folder made for it, such as `~/.idempotent_tools`): tightened to 0700. A folder
//!   shared with other files (a project folder, `/tmp`) is not ours to change; the file's
//!   own 0600 keeps the records private there.
//!
//! Only a store file (empty, or a SQLite file with this store's application id) is
//! touched: another program's database is refused later, unchanged, modes included.

use std::path::{Path, PathBuf};

use super::open::APPLICATION_ID;
use crate::failure::{StoreFailure, StoreResult};

const COMPANIONS: [&str; 3] = ["-wal", "-shm", "-journal"];

fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The store's `-wal`, `-shm` and `-journal` paths.
pub fn companions(path: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    COMPANIONS.iter().map(move |s| companion(path, s))
}

/// True for an empty file and for a SQLite file whose header carries this store's
/// application id (big-endian at offset 68).
fn is_store_file(path: &Path) -> bool {
    use std::io::Read;
    let mut header = Vec::with_capacity(100);
    // Non-blocking, and only a regular file is read: a FIFO swapped in after the check in
    // `open.rs` must not block this open (or the read) forever.
    let read = open_nonblocking(path).and_then(|f| {
        if !f.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        f.take(100).read_to_end(&mut header)
    });
    match read {
        Ok(0) => true,
        Ok(_) if header.len() == 100 => {
            header.starts_with(b"SQLite format 3\0")
                && header[68..72] == APPLICATION_ID.to_be_bytes()
        }
        _ => false,
    }
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

#[cfg(unix)]
pub fn secure_existing(path: &Path) -> StoreResult<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    if !is_store_file(path) {
        return Ok(());
    }

    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let label = path.display().to_string();
    let files =
        std::iter::once(path.to_path_buf()).chain(COMPANIONS.iter().map(|s| companion(path, s)));
    for file in files {
        let meta = match std::fs::metadata(&file) {
            Ok(meta) if meta.is_file() => meta,
            _ => continue, // absent, or not a file: opening reports what is wrong
        };
        let mode = meta.mode() & 0o777;
        if mode & 0o077 == 0 {
            continue;
        }
        if meta.uid() != me {
            return Err(StoreFailure::at(
                &label,
                "cannot open the store",
                format!(
                    "{} is owned by another user (uid {}) and readable or writable by others (mode {mode:04o}); \
                     its owner should run `chmod 600 {}`, or point this store at a file of your own",
                    file.display(),
                    meta.uid(),
                    file.display()
                ),
            ));
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).map_err(|e| {
            StoreFailure::at(
                &label,
                "cannot open the store",
                format!("cannot make {} private (chmod 600): {e}", file.display()),
            )
        })?;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        secure_own_folder(dir, path, me);
    }
    Ok(())
}

/// Tightens the store's folder to 0700 when it is ours and holds only this store's files.
/// Best effort: a folder we may not change is left as it is (the files are private).
#[cfg(unix)]
fn secure_own_folder(dir: &Path, path: &Path, me: libc::uid_t) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    let Ok(meta) = std::fs::metadata(dir) else {
        return;
    };
    if meta.uid() != me || meta.mode() & 0o077 == 0 {
        return;
    }
    let Some(own) = path.file_name() else { return };
    let mine = |name: &std::ffi::OsStr| {
        name == own
            || COMPANIONS
                .iter()
                .any(|s| companion(Path::new(own), s).as_os_str() == name)
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut only_ours = true;
    for entry in entries {
        match entry {
            Ok(e) if mine(&e.file_name()) => {}
            _ => only_ours = false,
        }
    }
    if only_ours {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
}

#[cfg(not(unix))]
pub fn secure_existing(_path: &Path) -> StoreResult<()> {
    // Windows: a file in the user's profile is private through its ACL already.
    let _ = (COMPANIONS, companion, is_store_file);
    Ok(())
}
