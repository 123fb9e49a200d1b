//! Signals to a worker's process group.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The process group of one coprocess (its pid is the group's id:
/// `process_group(0)`), shared by the coprocess, its kill switch and the
/// task that waits for it. Once that task has reaped the leader, it kills
/// the group one last time and no signal is sent after, so a later kill
/// never hits a group that reused the id (Linux does not reuse it while a
/// member lives).
#[derive(Debug)]
pub(crate) struct ProcessGroup {
    pgid: Pid,
    gone: AtomicBool,
    killed_by_switch: AtomicBool,
}

impl ProcessGroup {
    pub(crate) fn new(pid: u32) -> Self {
        let raw = i32::try_from(pid).expect("a pid fits in an i32");
        Self {
            pgid: Pid::from_raw(raw),
            gone: AtomicBool::new(false),
            killed_by_switch: AtomicBool::new(false),
        }
    }

    /// Sends `signal` to every process in the group, unless the group is
    /// already gone. Errors are logged, not returned: the caller cannot do
    /// anything better than going on.
    pub(crate) fn signal(&self, signal: Signal) {
        if self.gone.load(Ordering::Acquire) {
            return;
        }
        self.send(signal);
    }

    /// Kills the group (SIGKILL) through the pool's kill switch, so the exit
    /// is reported as [`ExitStatus::Killed`](kennel::ExitStatus::Killed).
    pub(crate) fn kill_by_switch(&self) {
        if self.gone.load(Ordering::Acquire) {
            return;
        }
        self.killed_by_switch.store(true, Ordering::Release);
        self.send(Signal::SIGKILL);
    }

    /// Whether the kill switch was used.
    pub(crate) fn was_killed_by_switch(&self) -> bool {
        self.killed_by_switch.load(Ordering::Acquire)
    }

    /// Called by the waiting task right after it reaped the group leader:
    /// kills whatever is left in the group and sends no signal after that.
    pub(crate) fn leader_reaped(&self) {
        if !self.gone.swap(true, Ordering::AcqRel) {
            self.send(Signal::SIGKILL);
        }
    }

    fn send(&self, signal: Signal) {
        match killpg(self.pgid, signal) {
            // ESRCH: nobody is left in the group; that is what we wanted.
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(err) => {
                tracing::warn!(pgid = self.pgid.as_raw(), %signal, %err, "could not signal a worker's process group");
            }
        }
    }
}
