//! A worker dies with the process that started it: on Linux each child asks
//! the kernel for SIGKILL when its parent ends (`PR_SET_PDEATHSIG`), so that
//! no worker outlives a server killed with `kill -9`.
//!
//! This file holds the one `unsafe` block of the workspace (ADR 0016):
//! [`Command::pre_exec`](tokio::process::Command::pre_exec) is an `unsafe`
//! function, because its closure runs in the child between `fork` and
//! `exec`, where only async-signal-safe calls are allowed.

use std::io;

use nix::errno::Errno;
use nix::sched::CpuSet;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::process::Command;

/// Makes the child of `command` get SIGKILL when the thread that started it
/// ends (for a Tokio runtime: when the runtime's worker thread, or the whole
/// process, ends). A child whose parent had already ended before the
/// request took effect fails to start.
///
/// The death signal is not inherited by the child's own children, and is
/// cleared when it runs a set-user-ID program: those are left to the
/// process-group kill and to a server's reaping of a previous run.
///
/// With `cpus`, the child is also bound to those CPUs before it runs its
/// program; if the kernel refuses the mask (none of its CPUs is still
/// allowed), the child keeps the CPUs it inherited.
#[expect(
    unsafe_code,
    reason = "pre_exec is unsafe; the closure only makes three system calls (ADR 0016)"
)]
pub(crate) fn die_with_parent(command: &mut Command, cpus: Option<CpuSet>) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before `exec`. It only
    // calls `prctl(PR_SET_PDEATHSIG)`, `getppid` and `sched_setaffinity`,
    // async-signal-safe system calls; it allocates nothing, takes no lock
    // and touches no state shared with the parent (`parent` is a copied
    // integer, `cpus` a copied fixed-size bit set). An error is built from a
    // raw errno, which does not allocate.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            // The parent ended between the fork and the request: the signal
            // will never come, so the child must not go on.
            if nix::unistd::getppid() != parent {
                return Err(io::Error::from(Errno::ESRCH));
            }
            if let Some(cpus) = &cpus {
                // A refused mask leaves the inherited one: pinning is an
                // optimisation, not a reason for the worker not to start.
                let _ = nix::sched::sched_setaffinity(Pid::from_raw(0), cpus);
            }
            Ok(())
        });
    }
}
