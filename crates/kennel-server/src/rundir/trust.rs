//! Whether a run directory is this user's alone: the checks [`RunDir::open`]
//! makes before it reads, writes or signals anything, and the opening of
//! its files without following a symbolic link.
//!
//! [`RunDir::open`]: super::RunDir::open

use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The sticky bit: in a directory with it, only a file's owner may remove
/// or rename the file (`/tmp`).
const STICKY: u32 = 0o1000;

/// Creates `path` (and its missing parents) with mode 0700 if `create`,
/// then checks that this user alone controls it, and returns it absolute:
///
/// 1. the run directory is a directory, not a symbolic link, owned by this
///    user and writable by no one else (no group or other write bit);
/// 2. every directory above it, as written and as resolved, is owned by
///    this user or by root, and one that others may write has the sticky
///    bit; a symbolic link on the way is owned by this user or by root.
///
/// # Errors
///
/// `PermissionDenied` naming the path and the rule it breaks, or the error
/// of creating or reading it (`NotFound` where it is missing and not to be
/// created).
pub(super) fn prepare(path: &Path, create: bool) -> io::Result<PathBuf> {
    let path = std::path::absolute(path)?;
    let me = nix::unistd::geteuid().as_raw();
    // Nothing is created below a directory another user controls.
    for above in path.ancestors().skip(1) {
        if let Ok(meta) = fs::symlink_metadata(above) {
            trusted_above(above, &meta, me)?;
        }
    }
    if create {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)?;
    }
    let meta = fs::symlink_metadata(&path)?;
    let (uid, mode) = (meta.uid(), meta.mode());
    let why = if meta.file_type().is_symlink() || !meta.is_dir() {
        "is not a directory (a symbolic link is refused)".to_owned()
    } else if uid != me {
        format!("is owned by another user (uid {uid}, this is uid {me})")
    } else if mode & 0o022 != 0 {
        let mode = mode & 0o7777;
        format!("is writable by others (mode {mode:o}; allowed: 0700 or 0755)")
    } else {
        String::new()
    };
    if !why.is_empty() {
        return Err(refused(&path, &why));
    }
    for above in fs::canonicalize(&path)?.ancestors().skip(1) {
        trusted_above(above, &fs::metadata(above)?, me)?;
    }
    Ok(path)
}

/// Rule 2 of [`prepare`] for one entry above the run directory.
fn trusted_above(path: &Path, meta: &Metadata, me: u32) -> io::Result<()> {
    if meta.uid() != me && meta.uid() != 0 {
        return Err(refused(
            path,
            &format!(
                "is owned by another user (uid {}): it could replace the run directory below it",
                meta.uid()
            ),
        ));
    }
    if meta.is_dir() && meta.mode() & 0o002 != 0 && meta.mode() & STICKY == 0 {
        return Err(refused(
            path,
            "is writable by every user without the sticky bit: anyone could replace the run directory below it",
        ));
    }
    Ok(())
}

fn refused(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "refused: {} {why}; kennel keeps its run directory where no other user can write (remove it, or name another with server.run_dir)",
            path.display()
        ),
    )
}

/// How [`open_write`] treats the file.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Open {
    /// Created, or emptied (a group's record).
    Fresh,
    /// Created if missing, never emptied (the lock, by a server).
    Kept,
    /// Only if it exists, never emptied (the lock, by the reaper).
    Existing,
}

/// Opens a file of the run directory for writing (one it creates gets mode
/// 0600); a symbolic link in its place is refused (`ELOOP`), never
/// followed.
pub(super) fn open_write(path: &Path, open: Open) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(open != Open::Existing)
        .truncate(open == Open::Fresh)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(nix::libc::ELOOP) {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "refused: {} is a symbolic link, which kennel never follows",
                        path.display()
                    ),
                )
            } else {
                e
            }
        })
}

/// The text of a file of the run directory; `None` for a symbolic link or
/// anything that is not a plain file.
pub(super) fn read(path: &Path) -> Option<String> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    io::read_to_string(file).ok()
}
