//! The CPU quota and the memory left under the limits of this process's
//! cgroup (v1 or v2).
//!
//! Both cgroup v2 (`cpu.max`, `memory.max`, `memory.current`) and v1
//! (`cpu.cfs_quota_us`, `cpu.cfs_period_us`, `memory.limit_in_bytes`,
//! `memory.usage_in_bytes`) are read, for the process's cgroup and each parent
//! up to the mount point, since a limit set on a parent binds its children
//! too; the tightest one wins.
//!
//! The usage of a cgroup counts its page cache. Reclaimable cache
//! (`inactive_file` in `memory.stat`) is taken off the usage, as the host's
//! `MemAvailable` also counts it as free (and as the kubelet's working set
//! does).
//!
//! The parsing is done by pure functions over file contents, so it is tested
//! without a container. Files that are missing or unreadable, and contents
//! that do not parse, mean "no limit known": nothing here panics.

use std::path::{Path, PathBuf};

use super::cgroup_mount::{CgroupMount, cgroup_dirs, parse_cgroup_path, parse_mountinfo};

/// The cgroup v2 default CPU period, in microseconds, when `cpu.max` gives
/// only the quota.
const DEFAULT_CPU_PERIOD_US: f64 = 100_000.0;

/// A cgroup v1 memory limit at or above this (1 EiB) means "no limit": the
/// kernel reports an unset limit as a number close to `i64::MAX`.
const V1_NO_MEMORY_LIMIT: u64 = 1 << 60;

/// Reads a file's contents; the real one reads the file system, tests pass a
/// map.
pub(super) type Read<'a> = &'a dyn Fn(&Path) -> Option<String>;

/// The directories of this process's cgroups, leaf first.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Cgroup {
    v2: Vec<PathBuf>,
    cpu_v1: Vec<PathBuf>,
    memory_v1: Vec<PathBuf>,
}

impl Cgroup {
    /// Finds the cgroup from `/proc/self/cgroup` and `/proc/self/mountinfo`,
    /// taking the common mounts under `/sys/fs/cgroup` when mountinfo names
    /// none.
    pub(super) fn find(read: Read<'_>) -> Self {
        let Some(paths) = read(Path::new("/proc/self/cgroup")).map(|s| parse_cgroup_path(&s))
        else {
            return Self::default();
        };
        let mounts = read(Path::new("/proc/self/mountinfo"))
            .map(|s| parse_mountinfo(&s))
            .unwrap_or_default();
        let common = |point: &str, v2: bool| CgroupMount {
            root: "/".to_owned(),
            point: PathBuf::from(point),
            v2,
            options: Vec::new(),
        };
        let v1 = |controller: &str| -> Vec<PathBuf> {
            let Some(path) = paths.v1(controller) else {
                return Vec::new();
            };
            let mount = mounts
                .iter()
                .find(|m| !m.v2 && m.options.iter().any(|o| o == controller))
                .cloned()
                .unwrap_or_else(|| common(&format!("/sys/fs/cgroup/{controller}"), false));
            cgroup_dirs(&mount, path)
        };
        let v2 = paths.unified.as_deref().map_or_else(Vec::new, |path| {
            let mount = mounts
                .iter()
                .find(|m| m.v2)
                .cloned()
                .unwrap_or_else(|| common("/sys/fs/cgroup", true));
            cgroup_dirs(&mount, path)
        });
        Self {
            v2,
            cpu_v1: v1("cpu"),
            memory_v1: v1("memory"),
        }
    }

    /// The tightest CPU quota, in CPUs, over the cgroup and its parents.
    pub(super) fn cpu_quota(&self, read: Read<'_>) -> Option<f64> {
        let v2 = self
            .v2
            .iter()
            .filter_map(|dir| parse_cpu_max(&read(&dir.join("cpu.max"))?));
        let v1 = self.cpu_v1.iter().filter_map(|dir| {
            parse_cfs_quota(
                &read(&dir.join("cpu.cfs_quota_us"))?,
                &read(&dir.join("cpu.cfs_period_us"))?,
            )
        });
        v2.chain(v1).reduce(f64::min)
    }

    /// The least memory left under a limit, over the cgroup and its parents.
    pub(super) fn memory_available(&self, read: Read<'_>) -> Option<u64> {
        let v2 = self.v2.iter().filter_map(|dir| {
            let limit = parse_bytes(&read(&dir.join("memory.max"))?)?;
            let usage = read(&dir.join("memory.current")).and_then(|s| parse_bytes(&s));
            let stat = read(&dir.join("memory.stat"));
            let reclaimable = stat.and_then(|s| parse_memory_stat(&s, "inactive_file"));
            Some(memory_headroom(limit, usage, reclaimable))
        });
        let v1 = self.memory_v1.iter().filter_map(|dir| {
            let limit = parse_memory_limit_v1(&read(&dir.join("memory.limit_in_bytes"))?)?;
            let usage = read(&dir.join("memory.usage_in_bytes")).and_then(|s| parse_bytes(&s));
            let stat = read(&dir.join("memory.stat"));
            let reclaimable = stat.and_then(|s| {
                parse_memory_stat(&s, "total_inactive_file")
                    .or_else(|| parse_memory_stat(&s, "inactive_file"))
            });
            Some(memory_headroom(limit, usage, reclaimable))
        });
        v2.chain(v1).min()
    }
}

/// The CPU quota in CPUs from a cgroup v2 `cpu.max` (`"$MAX $PERIOD"`), or
/// `None` for `max` (no quota) and for contents that do not parse.
fn parse_cpu_max(contents: &str) -> Option<f64> {
    let mut fields = contents.split_whitespace();
    let quota = fields.next()?;
    if quota == "max" {
        return None;
    }
    let quota = parse_positive(quota)?;
    let period = match fields.next() {
        Some(p) => parse_positive(p)?,
        None => DEFAULT_CPU_PERIOD_US,
    };
    if fields.next().is_some() {
        return None;
    }
    Some(quota / period)
}

/// The CPU quota in CPUs from cgroup v1 `cpu.cfs_quota_us` and
/// `cpu.cfs_period_us`, or `None` for `-1` (no quota) and for contents that do
/// not parse.
fn parse_cfs_quota(quota: &str, period: &str) -> Option<f64> {
    Some(parse_positive(quota.trim())? / parse_positive(period.trim())?)
}

/// A finite number above 0 (a quota or a period in microseconds).
fn parse_positive(s: &str) -> Option<f64> {
    let n: u64 = s.parse().ok()?;
    // Microsecond counts are far below 2^53, so the conversion is exact.
    (n > 0).then_some(n as f64)
}

/// A cgroup v1 `memory.limit_in_bytes`, or `None` for an unset limit (a huge
/// number) and for contents that do not parse.
fn parse_memory_limit_v1(contents: &str) -> Option<u64> {
    parse_bytes(contents).filter(|&n| n < V1_NO_MEMORY_LIMIT)
}

/// A file that holds one number of bytes (`memory.current`,
/// `memory.usage_in_bytes`, ...); a v2 `memory.max` of `max` (no limit) is
/// `None`, as are contents that do not parse.
fn parse_bytes(contents: &str) -> Option<u64> {
    contents.trim().parse().ok()
}

/// One `key value` line of a cgroup `memory.stat`.
fn parse_memory_stat(contents: &str, key: &str) -> Option<u64> {
    contents.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        if name == key {
            value.trim().parse().ok()
        } else {
            None
        }
    })
}

/// What is left under a memory `limit` with `usage` in use, of which
/// `reclaimable` bytes are page cache the kernel can drop.
fn memory_headroom(limit: u64, usage: Option<u64>, reclaimable: Option<u64>) -> u64 {
    let used = usage.unwrap_or(0).saturating_sub(reclaimable.unwrap_or(0));
    limit.saturating_sub(used)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A file system made of a map from path to contents.
    fn files(entries: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let map: HashMap<PathBuf, String> = entries
            .iter()
            .map(|(p, c)| (PathBuf::from(p), (*c).to_owned()))
            .collect();
        move |path| map.get(path).cloned()
    }

    const GIB: u64 = 1 << 30;

    #[test]
    fn cpu_max_reads_quota_over_period() {
        assert_eq!(parse_cpu_max("200000 100000\n"), Some(2.0));
        assert_eq!(parse_cpu_max("150000 100000"), Some(1.5));
        assert_eq!(parse_cpu_max("50000 100000"), Some(0.5));
        assert_eq!(parse_cpu_max("150000"), Some(1.5));
    }

    #[test]
    fn cpu_max_of_max_is_no_quota() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("max"), None);
    }

    #[test]
    fn cpu_max_of_garbage_or_empty_is_no_quota() {
        for s in [
            "",
            "\n",
            "   ",
            "lots 100000",
            "100000 0",
            "0 100000",
            "-1 100000",
            "1 2 3",
            "1.5 100000",
        ] {
            assert_eq!(parse_cpu_max(s), None, "{s:?}");
        }
    }

    #[test]
    fn cfs_quota_reads_v1_files() {
        assert_eq!(parse_cfs_quota("300000\n", "100000\n"), Some(3.0));
        assert_eq!(parse_cfs_quota("25000", "100000"), Some(0.25));
        assert_eq!(parse_cfs_quota("-1\n", "100000\n"), None);
        assert_eq!(parse_cfs_quota("", "100000"), None);
        assert_eq!(parse_cfs_quota("100000", "0"), None);
        assert_eq!(parse_cfs_quota("x", "y"), None);
    }

    #[test]
    fn memory_max_reads_bytes_and_max_is_no_limit() {
        assert_eq!(parse_bytes("2147483648\n"), Some(2 * GIB));
        assert_eq!(parse_bytes("max\n"), None);
        assert_eq!(parse_bytes(""), None);
        assert_eq!(parse_bytes("2G"), None);
        assert_eq!(parse_bytes("-1"), None);
    }

    #[test]
    fn memory_limit_v1_treats_huge_values_as_no_limit() {
        assert_eq!(parse_memory_limit_v1("1073741824\n"), Some(GIB));
        assert_eq!(parse_memory_limit_v1("9223372036854771712\n"), None);
        assert_eq!(parse_memory_limit_v1("9223372036854775807"), None);
        assert_eq!(parse_memory_limit_v1("-1"), None);
        assert_eq!(parse_memory_limit_v1(""), None);
    }

    #[test]
    fn memory_stat_reads_one_field() {
        let stat = "cache 100\ninactive_file 4096\ntotal_inactive_file 8192\n";
        assert_eq!(parse_memory_stat(stat, "inactive_file"), Some(4096));
        assert_eq!(parse_memory_stat(stat, "total_inactive_file"), Some(8192));
        assert_eq!(parse_memory_stat(stat, "active_file"), None);
        assert_eq!(parse_memory_stat("", "inactive_file"), None);
        assert_eq!(parse_memory_stat("inactive_file x", "inactive_file"), None);
    }

    #[test]
    fn headroom_is_limit_minus_usage_less_reclaimable_cache() {
        assert_eq!(memory_headroom(4 * GIB, Some(GIB), None), 3 * GIB);
        assert_eq!(memory_headroom(4 * GIB, Some(3 * GIB), Some(GIB)), 2 * GIB);
        assert_eq!(memory_headroom(4 * GIB, Some(5 * GIB), None), 0);
        assert_eq!(memory_headroom(4 * GIB, Some(GIB), Some(2 * GIB)), 4 * GIB);
        assert_eq!(memory_headroom(4 * GIB, None, None), 4 * GIB);
    }

    #[test]
    fn v2_container_limits_are_read() {
        let read = files(&[
            ("/proc/self/cgroup", "0::/\n"),
            (
                "/proc/self/mountinfo",
                "30 20 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            ),
            ("/sys/fs/cgroup/cpu.max", "150000 100000\n"),
            ("/sys/fs/cgroup/memory.max", "4294967296\n"),
            ("/sys/fs/cgroup/memory.current", "1073741824\n"),
            (
                "/sys/fs/cgroup/memory.stat",
                "anon 1\ninactive_file 536870912\n",
            ),
        ]);
        let cgroup = Cgroup::find(&read);
        assert_eq!(cgroup.cpu_quota(&read), Some(1.5));
        assert_eq!(cgroup.memory_available(&read), Some(4 * GIB - GIB / 2));
    }

    #[test]
    fn v2_a_parent_limit_binds_the_child() {
        let read = files(&[
            ("/proc/self/cgroup", "0::/app.slice/job.scope\n"),
            (
                "/proc/self/mountinfo",
                "30 20 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            ),
            ("/sys/fs/cgroup/app.slice/job.scope/cpu.max", "max 100000\n"),
            ("/sys/fs/cgroup/app.slice/job.scope/memory.max", "max\n"),
            ("/sys/fs/cgroup/app.slice/cpu.max", "400000 100000\n"),
            ("/sys/fs/cgroup/app.slice/memory.max", "2147483648\n"),
            ("/sys/fs/cgroup/app.slice/memory.current", "1073741824\n"),
        ]);
        let cgroup = Cgroup::find(&read);
        assert_eq!(cgroup.cpu_quota(&read), Some(4.0));
        assert_eq!(cgroup.memory_available(&read), Some(GIB));
    }

    #[test]
    fn v2_without_limits_is_unknown() {
        let read = files(&[
            ("/proc/self/cgroup", "0::/\n"),
            (
                "/proc/self/mountinfo",
                "30 20 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            ),
            ("/sys/fs/cgroup/cpu.max", "max 100000\n"),
            ("/sys/fs/cgroup/memory.max", "max\n"),
        ]);
        let cgroup = Cgroup::find(&read);
        assert_eq!(cgroup.cpu_quota(&read), None);
        assert_eq!(cgroup.memory_available(&read), None);
    }

    #[test]
    fn v2_falls_back_to_the_common_mount() {
        let read = files(&[
            ("/proc/self/cgroup", "0::/job\n"),
            ("/sys/fs/cgroup/job/cpu.max", "200000 100000\n"),
            ("/sys/fs/cgroup/job/memory.max", "1073741824\n"),
        ]);
        let cgroup = Cgroup::find(&read);
        assert_eq!(cgroup.cpu_quota(&read), Some(2.0));
        assert_eq!(cgroup.memory_available(&read), Some(GIB));
    }

    #[test]
    fn v1_container_limits_are_read() {
        let read = files(&[
            (
                "/proc/self/cgroup",
                "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n",
            ),
            (
                "/proc/self/mountinfo",
                "32 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                 35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
            ),
            ("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "250000\n"),
            ("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n"),
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "2147483648\n",
            ),
            (
                "/sys/fs/cgroup/memory/memory.usage_in_bytes",
                "1073741824\n",
            ),
            (
                "/sys/fs/cgroup/memory/memory.stat",
                "inactive_file 1\ntotal_inactive_file 536870912\n",
            ),
        ]);
        let cgroup = Cgroup::find(&read);
        assert_eq!(cgroup.cpu_quota(&read), Some(2.5));
        assert_eq!(cgroup.memory_available(&read), Some(GIB + GIB / 2));
        assert_eq!(
            super::super::system::cpus_within(8, cgroup.cpu_quota(&read)),
            3
        );
    }

    #[test]
    fn v1_unset_limits_are_unknown() {
        let read = files(&[
            ("/proc/self/cgroup", "4:memory:/\n1:cpu:/\n0::/\n"),
            (
                "/proc/self/mountinfo",
                "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                 35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                 41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
            ),
            ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"),
            ("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"),
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "46489600\n"),
        ]);
        let cgroup = Cgroup::find(&read);
        assert_eq!(cgroup.cpu_quota(&read), None);
        assert_eq!(cgroup.memory_available(&read), None);
    }

    #[test]
    fn hybrid_takes_the_tightest_of_v1_and_v2() {
        let read = files(&[
            ("/proc/self/cgroup", "4:memory:/job\n0::/job\n"),
            (
                "/proc/self/mountinfo",
                "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                 41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
            ),
            (
                "/sys/fs/cgroup/memory/job/memory.limit_in_bytes",
                "3221225472\n",
            ),
            ("/sys/fs/cgroup/unified/job/memory.max", "2147483648\n"),
        ]);
        let cgroup = Cgroup::find(&read);
        assert_eq!(cgroup.memory_available(&read), Some(2 * GIB));
    }

    #[test]
    fn unreadable_proc_files_mean_no_cgroup() {
        let read = files(&[]);
        let cgroup = Cgroup::find(&read);
        assert_eq!(cgroup, Cgroup::default());
        assert_eq!(cgroup.cpu_quota(&read), None);
        assert_eq!(cgroup.memory_available(&read), None);
    }

    #[test]
    fn garbage_in_cgroup_files_means_no_limit() {
        let read = files(&[
            ("/proc/self/cgroup", "0::/\n"),
            ("/proc/self/mountinfo", "not a mountinfo line\n"),
            ("/sys/fs/cgroup/cpu.max", "\u{0}\u{1}binary"),
            ("/sys/fs/cgroup/memory.max", ""),
        ]);
        let cgroup = Cgroup::find(&read);
        assert_eq!(cgroup.cpu_quota(&read), None);
        assert_eq!(cgroup.memory_available(&read), None);
    }
}
