//! Helpers shared by the integration tests: start the fixture worker, check
//! that processes have really ended, bound a wait, keep a CPU busy.
//!
//! A process counts as gone when `/proc/<pid>` is absent or the process is a
//! zombie (dead, only waiting for its parent to reap it: a zombie still
//! answers `kill(pid, 0)`, so that alone would not do).

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::time::Duration;

use kennel_process::CoprocessSpec;

/// How long a real process may take to end before a test fails.
pub const PROCESS_DEADLINE: Duration = Duration::from_secs(10);

/// The path of the fixture worker program.
pub const FIXTURE: &str = env!("CARGO_BIN_EXE_kennel-fixture-worker");

/// A spec that runs the fixture worker with `flags`.
pub fn fixture(flags: &[&str]) -> CoprocessSpec {
    let argv = std::iter::once(FIXTURE).chain(flags.iter().copied());
    CoprocessSpec::new(argv)
}

/// `(state, pgrp)` of a process, from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: skip past it.
    let rest = &text[text.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

fn is_dead_state(state: char) -> bool {
    matches!(state, 'Z' | 'X' | 'x')
}

/// Whether `pid` is a live process (not gone, not a zombie).
pub fn is_running(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _)| !is_dead_state(state))
}

/// The live processes of the process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|(state, pgrp)| pgrp == pgid && !is_dead_state(state)))
        .collect()
}

/// Polls `condition` every 10 ms of real time, for at most
/// [`PROCESS_DEADLINE`]; panics with `what` if it never holds.
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let polling = async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    if tokio::time::timeout(PROCESS_DEADLINE, polling)
        .await
        .is_err()
    {
        panic!("timed out after {PROCESS_DEADLINE:?} waiting until {what}");
    }
}

/// Waits (bounded) until `pid` is gone.
pub async fn assert_process_ends(pid: u32) {
    eventually(&format!("process {pid} is gone"), || !is_running(pid)).await;
}

/// Waits (bounded) until nothing is left in the process group `pgid`.
pub async fn assert_group_ends(pgid: u32) {
    eventually(&format!("process group {pgid} is empty"), || {
        group_members(pgid).is_empty()
    })
    .await;
}

/// Keeps the CPU busy for `duration` of real time without sleeping, as a job
/// of CPU work does; returns how many turns it took.
pub fn spin(duration: Duration) -> u64 {
    let started = std::time::Instant::now();
    let mut n = 0u64;
    while started.elapsed() < duration {
        n = std::hint::black_box(n.wrapping_add(1));
    }
    n
}

/// Awaits `future` for at most [`PROCESS_DEADLINE`] of real time.
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(PROCESS_DEADLINE, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {PROCESS_DEADLINE:?} waiting for {what}"),
    }
}

/// When `pid` started, in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`): with the pid, it names one process even after the
/// pid is reused.
pub fn start_time(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    // `rest` starts at field 3 (state): field 22 is the 20th from here.
    rest.split(' ').nth(19)?.parse().ok()
}

/// Whether the process `pid` that started at `started` (see [`start_time`])
/// still runs: a zombie, or another process that took the pid, does not.
pub fn is_running_since(pid: u32, started: u64) -> bool {
    is_running(pid) && start_time(pid) == Some(started)
}

/// Every live descendant of `pid` (children, their children, …), from the
/// parent links in `/proc`. Zombies are left out.
pub fn live_descendants(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut links = Vec::new();
    for p in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some(rest) = text.rfind(')').map(|at| &text[at + 2..]) else {
            continue;
        };
        let mut fields = rest.split(' ');
        let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('X');
        if let Some(ppid) = fields.next().and_then(|s| s.parse::<u32>().ok()) {
            links.push((p, ppid, is_dead_state(state)));
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(p, pp, dead) in &links {
            if pp == parent && !found.contains(&p) {
                frontier.push(p);
                if !dead {
                    found.push(p);
                }
            }
        }
    }
    found
}

/// Every live process as `(pid, process group)`, from one walk of `/proc`.
pub fn live_processes() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| match stat(pid) {
            Some((state, pgrp)) if !is_dead_state(state) => Some((pid, pgrp)),
            _ => None,
        })
        .collect()
}
