//! The reaper (`kennel reaper DIR`, a hidden command of the server's own
//! binary): it holds the read end of a pipe whose write end only the
//! server has, and when that reads end-of-file (the server ended, however
//! it ended) it takes the run directory's lock and kills the groups still
//! recorded there, as the next server would ([`RunDir`]). It starts with an
//! empty environment (no secret of the server's reaches it) and in a
//! process group of its own (a terminal's Ctrl-C reaches only the server).

use std::io;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::rundir::{Reaped, RunDir};

/// How long the reaper tries to take the run directory's lock once the
/// server is gone. The lock of a dead server goes at once; one still held
/// after this is another server's, which reaps the directory itself.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(5);

/// How often the reaper tries the lock meanwhile.
const LOCK_RETRY: Duration = Duration::from_millis(20);

/// The reaper of a running server: dropping it (the server's end) closes
/// the pipe, and the reaper reaps.
#[derive(Debug)]
pub(crate) struct Reaper {
    /// The reaper process, waited for by no one: it outlives this one.
    _child: Child,
    /// The write end of the pipe: never written, closed on drop (end of
    /// file for the reaper, which reaps once this process has let the run
    /// directory go; not waited for: the server is ending too).
    _pipe: ChildStdin,
}

impl Reaper {
    /// Starts `exe reaper <run_dir>` in a process group of its own, with an
    /// empty environment.
    ///
    /// # Errors
    ///
    /// The process cannot be started.
    pub(crate) fn spawn(exe: &Path, run_dir: &Path) -> io::Result<Self> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(exe)
            .arg("reaper")
            .arg(run_dir)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()?;
        let pipe = child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("no pipe"))?;
        Ok(Self {
            _child: child,
            _pipe: pipe,
        })
    }
}

/// The reaper's side (`kennel reaper DIR`): waits until its standard input
/// ends (the server is gone), then locks the run directory and kills the
/// groups recorded there. `Ok(None)` when another server holds the
/// directory after [`LOCK_WAIT`] (that server reaps it), or when the
/// directory is gone: nothing is recorded there, and it is not made again.
///
/// # Errors
///
/// The run directory cannot be read.
pub(crate) fn watch(run_dir: &Path) -> io::Result<Option<Reaped>> {
    // Read to the end; a broken stdin says the same as its end.
    let _ = io::copy(&mut io::stdin().lock(), &mut io::sink());
    match open_within(run_dir, LOCK_WAIT, RunDir::reopen) {
        Ok(opened) => Ok(opened.map(|(_, reaped)| reaped)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

/// `open` ([`RunDir::open`] or [`RunDir::reopen`]), retried while another
/// process holds the lock, for at most `wait`: the reaper of a server that
/// just ended may hold it for the few milliseconds its reaping takes.
/// `Ok(None)` if it is still held.
///
/// # Errors
///
/// As `open`, but for a lock held by another process.
pub(crate) fn open_within(
    run_dir: &Path,
    wait: Duration,
    open: fn(&Path) -> io::Result<(RunDir, Reaped)>,
) -> io::Result<Option<(RunDir, Reaped)>> {
    let deadline = Instant::now() + wait;
    loop {
        match open(run_dir) {
            Ok(opened) => return Ok(Some(opened)),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(LOCK_RETRY);
            }
            Err(err) => return Err(err),
        }
    }
}
