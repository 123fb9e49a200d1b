//! What kennel reads of a worker's processes in `/proc`, itself (a
//! worker's own report is not trusted): the resident memory of its whole
//! process group, and the CPU time of each thread of the worker and the
//! processes it started.

use std::time::Duration;

use nix::unistd::{SysconfVar, sysconf};

/// The fields after the command's closing parenthesis in a `stat` file:
/// the state, the parent, the process group, … (field 3 of `proc(5)` is
/// the first).
fn stat_fields(path: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(path).ok()?;
    let (_, fields) = stat.rsplit_once(')')?;
    Some(fields.split_whitespace().map(str::to_owned).collect())
}

/// The `stat` fields of each live process of the group `pgid`.
fn group(pgid: u32) -> Vec<Vec<String>> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| stat_fields(&format!("/proc/{pid}/stat")))
        .filter(|f| {
            f.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid)
                && !matches!(f.first().map(String::as_str), Some("Z" | "X" | "x"))
        })
        .collect()
}

/// The resident set of every live process in the group `pgid`, in bytes;
/// `None` when no process of the group is found (it has ended).
pub(crate) fn group_rss(pgid: u32) -> Option<u64> {
    let page = sysconf(SysconfVar::PAGE_SIZE).ok().flatten()?;
    let page = u64::try_from(page).ok()?;
    let pages: Vec<u64> = group(pgid)
        .iter()
        // The 24th field: resident pages.
        .filter_map(|f| f.get(21)?.parse::<u64>().ok())
        .collect();
    (!pages.is_empty()).then(|| {
        pages.iter().fold(0u64, |total, p| {
            total.saturating_add(p.saturating_mul(page))
        })
    })
}

/// The most processes of a worker's tree whose threads are read.
const MAX_PROCESSES: usize = 1024;

/// Each thread of the worker `pid` and of the processes it started (its
/// children, theirs, …, found through each thread's `children` file, so
/// that no scan of `/proc` is needed): its id and the CPU time it has used
/// (user and system); `None` when the worker is gone.
pub(crate) fn tree_threads(pid: u32) -> Option<Vec<(u64, Duration)>> {
    let tick = sysconf(SysconfVar::CLK_TCK).ok().flatten()?;
    let tick = u64::try_from(tick).ok().filter(|t| *t > 0)?;
    let mut threads = Vec::new();
    let mut processes = vec![pid];
    // A bound on the walk: a worker's own tree, not a fork bomb's.
    let mut left = MAX_PROCESSES;
    while let Some(p) = processes.pop() {
        if left == 0 {
            break;
        }
        left -= 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            if p == pid {
                return None;
            }
            continue;
        };
        for tid in tasks
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
        {
            let Some(f) = stat_fields(&format!("/proc/{p}/task/{tid}/stat")) else {
                continue;
            };
            if matches!(f.first().map(String::as_str), Some("Z" | "X" | "x")) {
                continue;
            }
            // The 14th and 15th fields: user and system time, in ticks.
            let ticks = |i: usize| f.get(i).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
            let nanos = (ticks(11) + ticks(12)).saturating_mul(1_000_000_000) / tick;
            threads.push((tid, Duration::from_nanos(nanos)));
            if let Ok(children) = std::fs::read_to_string(format!("/proc/{p}/task/{tid}/children"))
            {
                processes.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    Some(threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_has_memory_and_threads_and_a_made_up_process_has_none() {
        let group = nix::unistd::getpgrp().as_raw().unsigned_abs();
        assert!(group_rss(group).is_some_and(|b| b > 0));
        assert!(tree_threads(std::process::id()).is_some_and(|t| !t.is_empty()));
        assert_eq!(group_rss(u32::MAX - 7), None);
        assert_eq!(tree_threads(u32::MAX - 7), None);
    }
}
