//! The run directory of `kennel serve`: one file `group-<pgid>` per live
//! worker process group, holding `<pgid> <start time>` (the leader's start
//! time in clock ticks since boot, field 22 of `/proc/<pid>/stat`), so that
//! the next server kills what a server that died left (docs/SERVICE.md,
//! "No orphans: the run directory").
//!
//! Only the groups the files name are ever signalled: one whose leader runs
//! with the recorded start time and still leads its group (its program is
//! no test: an `exec` changes it), or, once the leader has ended, one with
//! a live member (a group's id goes to no new process while it has one).
//! The directory is locked (`flock`) while a server uses it, and must be
//! this user's alone (`trust.rs`).

mod leader;
mod trust;

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use self::leader::{group_has_members, leads_group, start_time};
use self::trust::Open;

/// The run directory of a server: locked, and the groups of a previous run
/// reaped (see the module's documentation).
#[derive(Debug)]
pub(crate) struct RunDir {
    path: PathBuf,
    _lock: Flock<File>,
}

/// What [`RunDir::open`] found left by a previous run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct Reaped {
    /// The process groups that still had a live process and were killed.
    pub groups: Vec<u32>,
    /// Files whose group had already ended (removed).
    pub stale: usize,
}

/// The run directory used when the config names none, one per port:
/// under `$XDG_RUNTIME_DIR/kennel/` (a directory of the user's own); for
/// root without it, under `/run/kennel/`; else under
/// `/tmp/kennel-<uid>/`, which [`RunDir::open`] refuses if another user
/// made it first.
pub(crate) fn default_run_dir(port: u16) -> PathBuf {
    let base = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("kennel"),
        None if nix::unistd::geteuid().is_root() => PathBuf::from("/run/kennel"),
        None => std::env::temp_dir().join(format!("kennel-{}", nix::unistd::geteuid())),
    };
    base.join(port.to_string())
}

impl RunDir {
    /// Creates (if need be, mode 0700) and locks the directory, then kills
    /// the process groups a previous run left there and removes their
    /// files.
    ///
    /// # Errors
    ///
    /// The directory cannot be created or read; it is not this user's alone
    /// or its `lock` is a symbolic link (`PermissionDenied`, before anything
    /// in it is touched); or another server holds it (`WouldBlock`).
    pub(crate) fn open(path: &Path) -> io::Result<(Self, Reaped)> {
        Self::open_made(path, true)
    }

    /// [`RunDir::open`] for a directory a server made (the reaper's):
    /// nothing is created, so a directory removed meanwhile is not made
    /// again.
    ///
    /// # Errors
    ///
    /// As [`RunDir::open`]; `NotFound` when the directory or its lock is
    /// gone.
    pub(crate) fn reopen(path: &Path) -> io::Result<(Self, Reaped)> {
        Self::open_made(path, false)
    }

    fn open_made(path: &Path, create: bool) -> io::Result<(Self, Reaped)> {
        let path = trust::prepare(path, create)?;
        let lock = if create { Open::Kept } else { Open::Existing };
        let lock = trust::open_write(&path.join("lock"), lock)?;
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
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the file of the group led by `pid` (a worker just started).
    /// The file goes when the returned record is dropped (when the worker
    /// has ended). `None` if the process is already gone or the file cannot
    /// be written; then only the death signal covers it.
    pub(crate) fn record(&self, pid: u32) -> Option<Record> {
        let started = start_time(pid)?;
        let file = self.path.join(format!("group-{pid}"));
        let line = format!("{pid} {started}\n");
        match trust::open_write(&file, Open::Fresh).and_then(|mut f| f.write_all(line.as_bytes())) {
            Ok(()) => Some(Record { file }),
            Err(err) => {
                tracing::warn!(target: "kennel_server", path = %file.display(), %err, "cannot record a worker's process group");
                None
            }
        }
    }

    /// Removes the files of groups whose leader has ended (at exit, after
    /// every pool closed, for records whose removal did not run).
    pub(crate) fn clean(&self) {
        for r in self.records() {
            if start_time(r.pgid) != Some(r.start) {
                let _ = fs::remove_file(r.file);
            }
        }
    }

    fn reap(&self) -> io::Result<Reaped> {
        let mut reaped = Reaped::default();
        for Recorded { file, pgid, start } in self.records() {
            let live = match start_time(pgid) {
                // The leader still runs: the group is the worker's if it is
                // the same process, still leading its group.
                Some(t) if t == start => leads_group(pgid),
                // The pid is another process's now. While a group has a
                // member its id is not given to a new process, so the old
                // group has ended.
                Some(_) => false,
                // The leader has ended; its children may still hold the id.
                None => group_has_members(pgid),
            };
            if live {
                match killpg(
                    Pid::from_raw(i32::try_from(pgid).unwrap_or(i32::MAX)),
                    Signal::SIGKILL,
                ) {
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

    /// Every well-formed `group-*` file that is a plain file.
    fn records(&self) -> Vec<Recorded> {
        let Ok(entries) = fs::read_dir(&self.path) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| Recorded::read(&e.path()))
            .collect()
    }
}

/// One `group-*` file, read.
struct Recorded {
    file: PathBuf,
    pgid: u32,
    /// The leader's start time.
    start: u64,
}

impl Recorded {
    /// The file at `file`, if it is a well-formed `group-*` plain file.
    fn read(file: &Path) -> Option<Self> {
        let named = file.file_name()?.to_str()?.strip_prefix("group-")?;
        let text = trust::read(file)?;
        let mut words = text.split_whitespace();
        let pgid: u32 = words.next()?.parse().ok()?;
        let start: u64 = words.next()?.parse().ok()?;
        // A file must name the group it is named after, and never the
        // init process or a group id that is not a pid.
        let valid = named == pgid.to_string() && pgid > 1 && i32::try_from(pgid).is_ok();
        valid.then(|| Self {
            file: file.to_owned(),
            pgid,
            start,
        })
    }
}

/// The file of one live worker group; removed on drop.
#[derive(Debug)]
pub(crate) struct Record {
    file: PathBuf,
}

impl Drop for Record {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kennel-rundir-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    /// A directory of this user's alone, whatever the umask.
    fn mkdir(dir: &Path) {
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new().mode(0o700).create(dir).unwrap();
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
        mkdir(&dir);
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

    /// A real process, in a group of its own if `leads`; killed and
    /// waited for on drop.
    struct Leader(std::process::Child);

    impl Leader {
        fn spawn(leads: bool) -> Self {
            use std::os::unix::process::CommandExt;
            let mut command = std::process::Command::new("sleep");
            command.arg("1000");
            if leads {
                command.process_group(0);
            }
            Self(command.spawn().expect("sleep"))
        }

        fn pid(&self) -> u32 {
            self.0.id()
        }

        /// Whether it still runs (`try_wait` reaps it once killed).
        fn runs(&mut self) -> bool {
            self.0.try_wait().expect("try_wait").is_none()
        }

        /// A `group-*` file for it, as a server writes one, `late` ticks
        /// off its start time.
        fn record(&self, dir: &Path, late: u64) {
            let pid = self.pid();
            let started = start_time(pid).expect("start time") + late;
            fs::write(
                dir.join(format!("group-{pid}")),
                format!("{pid} {started}\n"),
            )
            .unwrap();
        }
    }

    impl Drop for Leader {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_group_is_killed_only_when_its_leader_has_the_recorded_start_time_and_leads_it() {
        let dir = temp("leader");
        mkdir(&dir);
        let mut later = Leader::spawn(true);
        later.record(&dir, 1);
        // A process of this test's own group, named as if it led one.
        let mut member = Leader::spawn(false);
        member.record(&dir, 0);
        let mut worker = Leader::spawn(true);
        worker.record(&dir, 0);
        let (_dir, reaped) = RunDir::open(&dir).expect("open");
        assert_eq!(reaped.groups, [worker.pid()], "{reaped:?}");
        assert_eq!(reaped.stale, 2);
        assert!(
            later.runs(),
            "a leader with another start time is not signalled"
        );
        assert!(
            member.runs(),
            "a process that leads no group is not signalled"
        );
        // The kill is sent: the process ends within the bound.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while worker.runs() {
            assert!(
                std::time::Instant::now() < deadline,
                "the recorded worker was not killed"
            );
            std::thread::yield_now();
        }
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_symbolic_link_in_place_of_the_lock_is_refused_and_its_target_kept() {
        let dir = temp("link");
        mkdir(&dir);
        let target = temp("link-target");
        fs::write(&target, "precious\n").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("lock")).unwrap();
        let err = RunDir::open(&dir).expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "precious\n");
        let _ = fs::remove_dir_all(&dir);
        let _ = fs::remove_file(&target);
    }

    #[test]
    fn a_directory_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp("writable");
        mkdir(&dir);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let err = RunDir::open(&dir).expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        assert!(err.to_string().contains("writable by others"), "{err}");
        // One made by kennel is this user's alone.
        let made = dir.join("made");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        let (run, _) = RunDir::open(&made).expect("open");
        assert_eq!(
            fs::metadata(run.path()).unwrap().permissions().mode() & 0o777,
            0o700
        );
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
