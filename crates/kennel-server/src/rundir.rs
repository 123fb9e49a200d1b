//! The run directory of `kennel serve`: one file per live worker process
//! group, so that a server that died without closing its pools (`kill -9`,
//! the OOM killer) has its leftovers killed by the next one.
//!
//! The worker itself dies with the server (the death signal, ADR 0016), but
//! its own children do not inherit that; they stay in the worker's process
//! group, which the file names. As JODConverter's `existingProcessAction`
//! kills the office process a dead predecessor left, a server reaps at start
//! the groups a previous run left in the same run directory.
//!
//! A file `group-<pgid>` holds `<pgid> <start time>`, the start time of the
//! group's leader in clock ticks since boot (field 22 of
//! `/proc/<pid>/stat`), so that a pid the system gave to another process
//! since is told from the worker's. Only the groups the files name are ever
//! signalled. The directory is locked (`flock`) while a server uses it: two
//! servers never share one.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The run directory of a server: locked, and the groups of a previous run
/// reaped (see the module's documentation).
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    _lock: Flock<File>,
}

/// What [`RunDir::open`] found left by a previous run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reaped {
    /// The process groups that still had a live process and were killed.
    pub groups: Vec<u32>,
    /// Files whose group had already ended (removed).
    pub stale: usize,
}

/// The run directory used when the config names none: under
/// `$XDG_RUNTIME_DIR/kennel/`, else under the temporary directory
/// (`/tmp/kennel-<uid>/`), one per port.
pub fn default_run_dir(port: u16) -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("kennel").join(port.to_string()),
        None => std::env::temp_dir()
            .join(format!("kennel-{}", nix::unistd::getuid()))
            .join(port.to_string()),
    }
}

impl RunDir {
    /// Creates (if need be) and locks the directory, then kills the process
    /// groups a previous run left there and removes their files.
    ///
    /// # Errors
    ///
    /// The directory cannot be created or read, or another server holds it
    /// (`WouldBlock`).
    pub fn open(path: impl Into<PathBuf>) -> io::Result<(Self, Reaped)> {
        let path = path.into();
        fs::create_dir_all(&path)?;
        let lock = File::create(path.join("lock"))?;
        let lock = Flock::lock(lock, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
            if errno == Errno::EWOULDBLOCK {
                io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!("another kennel server uses {}", path.display()),
                )
            } else {
                io::Error::from(errno)
            }
        })?;
        let dir = Self { path, _lock: lock };
        let reaped = dir.reap()?;
        Ok((dir, reaped))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the file of the group led by `pid` (a worker just started).
    /// The file goes when the returned record is dropped (when the worker
    /// has ended). `None` if the process is already gone or the file cannot
    /// be written; then only the death signal covers it.
    pub fn record(&self, pid: u32) -> Option<Record> {
        let started = start_time(pid)?;
        let file = self.path.join(format!("group-{pid}"));
        match fs::write(&file, format!("{pid} {started}\n")) {
            Ok(()) => Some(Record { file }),
            Err(err) => {
                tracing::warn!(target: "kennel_server", path = %file.display(), %err, "cannot record a worker's process group");
                None
            }
        }
    }

    /// Removes the files of groups whose leader has ended (at exit, after
    /// every pool closed, for records whose removal did not run).
    pub fn clean(&self) {
        for (file, pgid, started) in self.records() {
            if start_time(pgid) != Some(started) {
                let _ = fs::remove_file(file);
            }
        }
    }

    fn reap(&self) -> io::Result<Reaped> {
        let mut reaped = Reaped::default();
        for (file, pgid, started) in self.records() {
            let live = match start_time(pgid) {
                // The leader still runs: the group is the worker's.
                Some(t) if t == started => true,
                // The pid is another process's now. While a group has a
                // member its id is not given to a new process, so the old
                // group has ended.
                Some(_) => false,
                // The leader has ended; its children may still hold the id.
                None => group_has_members(pgid),
            };
            if live {
                match killpg(Pid::from_raw(pgid_raw(pgid)), Signal::SIGKILL) {
                    Ok(()) => reaped.groups.push(pgid),
                    Err(Errno::ESRCH) => reaped.stale += 1,
                    Err(err) => {
                        tracing::warn!(target: "kennel_server", pgid, %err, "cannot kill a process group left by a previous run");
                    }
                }
            } else {
                reaped.stale += 1;
            }
            fs::remove_file(&file)?;
        }
        Ok(reaped)
    }

    /// Every well-formed `group-*` file: its path, group and start time.
    fn records(&self) -> Vec<(PathBuf, u32, u64)> {
        let Ok(entries) = fs::read_dir(&self.path) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(named) = name.to_str().and_then(|n| n.strip_prefix("group-")) else {
                continue;
            };
            let Ok(text) = fs::read_to_string(entry.path()) else {
                continue;
            };
            let mut words = text.split_whitespace();
            let (Some(pgid), Some(started)) = (
                words.next().and_then(|w| w.parse::<u32>().ok()),
                words.next().and_then(|w| w.parse::<u64>().ok()),
            ) else {
                continue;
            };
            // A file must name the group it is named after, and never the
            // init process or a group id that is not a pid.
            if named != pgid.to_string() || pgid <= 1 || i32::try_from(pgid).is_err() {
                continue;
            }
            found.push((entry.path(), pgid, started));
        }
        found
    }
}

/// The file of one live worker group; removed on drop.
#[derive(Debug)]
pub struct Record {
    file: PathBuf,
}

impl Drop for Record {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.file);
    }
}

fn pgid_raw(pgid: u32) -> i32 {
    i32::try_from(pgid).unwrap_or(i32::MAX)
}

/// The fields of `/proc/<pid>/stat` after the command (which may hold
/// spaces and parentheses): field 3 (the state) first.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    Some(after.split_whitespace().map(str::to_owned).collect())
}

/// The start time of a live (not zombie) process, in clock ticks since boot.
fn start_time(pid: u32) -> Option<u64> {
    let fields = stat_fields(pid)?;
    if matches!(fields.first().map(String::as_str), Some("Z" | "X")) {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// Whether a live process is in group `pgid`.
fn group_has_members(pgid: u32) -> bool {
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .and_then(stat_fields)
            .is_some_and(|f| {
                !matches!(f.first().map(String::as_str), Some("Z" | "X"))
                    && f.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kennel-rundir-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_run_directory_is_held_by_one_server_at_a_time() {
        let dir = temp("lock");
        let (first, _) = RunDir::open(&dir).expect("open");
        let err = RunDir::open(&dir).expect_err("held");
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(
            err.to_string().contains("another kennel server uses"),
            "{err}"
        );
        drop(first);
        RunDir::open(&dir).expect("free again");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_whose_pid_now_belongs_to_another_process_is_not_signalled() {
        let dir = temp("reused");
        fs::create_dir_all(&dir).unwrap();
        // This test's own process, with a start time that is not its own: a
        // pid reused since the file was written.
        let me = std::process::id();
        let real = start_time(me).expect("own start time");
        fs::write(
            dir.join(format!("group-{me}")),
            format!("{me} {}\n", real + 1),
        )
        .unwrap();
        // A file naming another group than its name, and one naming pid 1.
        fs::write(dir.join("group-1"), "1 0\n").unwrap();
        fs::write(
            dir.join(format!("group-{}", me + 1)),
            format!("{me} {real}\n"),
        )
        .unwrap();
        let (_dir, reaped) = RunDir::open(&dir).expect("open");
        assert!(reaped.groups.is_empty(), "{reaped:?}");
        assert_eq!(reaped.stale, 1);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_record_is_removed_when_dropped() {
        let dir = temp("record");
        let (run, _) = RunDir::open(&dir).expect("open");
        let record = run.record(std::process::id()).expect("recorded");
        let file = dir.join(format!("group-{}", std::process::id()));
        assert!(file.exists());
        drop(record);
        assert!(!file.exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
