//! The resident memory of a worker's whole process group, read from
//! `/proc` by kennel itself (a worker's own report is not trusted).

use nix::unistd::{SysconfVar, sysconf};

/// The resident set of every live process in the group `pgid`, in bytes;
/// `None` when no process of the group is found (it has ended).
///
/// Each `/proc/<pid>/stat` is read once: its fields after the command's
/// closing parenthesis are the state, the parent, the process group, …
/// and, 22nd of them, the resident pages.
pub(crate) fn group_rss(pgid: u32) -> Option<u64> {
    let page = sysconf(SysconfVar::PAGE_SIZE).ok().flatten()?;
    let page = u64::try_from(page).ok()?;
    let mut total = 0u64;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, fields)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = fields.split_whitespace().collect();
        let state = fields.first().copied();
        let pgrp = fields.get(2).and_then(|f| f.parse::<u32>().ok());
        if pgrp != Some(pgid) || matches!(state, Some("Z" | "X" | "x")) {
            continue;
        }
        if let Some(pages) = fields.get(21).and_then(|f| f.parse::<u64>().ok()) {
            total = total.saturating_add(pages.saturating_mul(page));
            found = true;
        }
    }
    found.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_of_this_test_has_memory_and_a_made_up_group_has_none() {
        let me = nix::unistd::getpgrp().as_raw().unsigned_abs();
        assert!(group_rss(me).is_some_and(|b| b > 0));
        assert_eq!(group_rss(u32::MAX - 7), None);
    }
}
