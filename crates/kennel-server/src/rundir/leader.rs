//! What `/proc` says of a process group's leader: its start time and
//! whether it still leads its group, which tell a worker from a process
//! that was given the same pid since, and whether a group still has a live
//! member.

use std::fs;

/// The fields of `/proc/<pid>/stat` after the command (which may hold
/// spaces and parentheses): field 3 (the state) first.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    Some(after.split_whitespace().map(str::to_owned).collect())
}

fn live(fields: &[String]) -> bool {
    !matches!(fields.first().map(String::as_str), Some("Z" | "X"))
}

/// The start time of a live (not zombie) process, in clock ticks since
/// boot (field 22 of `/proc/<pid>/stat`).
pub(super) fn start_time(pid: u32) -> Option<u64> {
    let fields = stat_fields(pid)?;
    if !live(&fields) {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// Whether `pid` is a live process that leads its own process group (as
/// every worker does; field 5 of `/proc/<pid>/stat`).
pub(super) fn leads_group(pid: u32) -> bool {
    stat_fields(pid)
        .is_some_and(|f| live(&f) && f.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pid))
}

/// Whether a live process is in group `pgid`.
pub(super) fn group_has_members(pgid: u32) -> bool {
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .and_then(stat_fields)
            .is_some_and(|f| live(&f) && f.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid))
    })
}
