//! What [`SystemComputer`](crate::SystemComputer) reads: CPUs and free memory
//! from `/proc` and the process's own cgroup (SPEC S9).
//!
//! CPUs are the affinity count (`std::thread::available_parallelism`), lowered
//! to `ceil(quota / period)` when a cgroup CPU quota is set, and at least 1.
//! Free memory is the smaller of the host's `MemAvailable` and the cgroup's
//! limit minus its usage. Both cgroup v2 (`cpu.max`, `memory.max`,
//! `memory.current`) and v1 (`cpu.cfs_quota_us`, `cpu.cfs_period_us`,
//! `memory.limit_in_bytes`, `memory.usage_in_bytes`) are read, for the
//! process's cgroup and each parent up to the mount point, since a limit set on
//! a parent binds its children too; the tightest one wins.
//!
//! The usage of a cgroup counts its page cache. Reclaimable cache
//! (`inactive_file` in `memory.stat`) is taken off the usage, as the host's
//! `MemAvailable` also counts it as free (and as the kubelet's working set does).
//!
//! The parsing is done by pure functions over file contents, so it is tested
//! without a container. Files that are missing or unreadable, and contents that
//! do not parse, mean "no limit known": nothing here panics. Off Linux the
//! CPUs are the affinity count and the memory is unknown (`u64::MAX`).

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

/// The cgroup v2 default CPU period, in microseconds, when `cpu.max` gives
/// only the quota.
const DEFAULT_CPU_PERIOD_US: f64 = 100_000.0;

/// A cgroup v1 memory limit at or above this (1 EiB) means "no limit": the
/// kernel reports an unset limit as a number close to `i64::MAX`.
const V1_NO_MEMORY_LIMIT: u64 = 1 << 60;

/// Reads a file's contents; the real one reads the file system, tests pass a
/// map.
type Read<'a> = &'a dyn Fn(&Path) -> Option<String>;

fn read_file(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// How many CPUs this process may use: the affinity count, lowered by a
/// cgroup CPU quota, at least 1.
pub(crate) fn available_parallelism() -> usize {
    let affinity = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let quota = if cfg!(target_os = "linux") {
        Cgroup::find(&read_file).cpu_quota(&read_file)
    } else {
        None
    };
    cpus_within(affinity, quota)
}

/// How many bytes of memory are free for this process: the smaller of the
/// host's `MemAvailable` and the cgroup's limit minus its usage; `u64::MAX`
/// when neither can be read.
pub(crate) fn available_memory() -> u64 {
    if !cfg!(target_os = "linux") {
        return u64::MAX;
    }
    let host = read_file(Path::new("/proc/meminfo")).and_then(|s| parse_meminfo_available(&s));
    let cgroup = Cgroup::find(&read_file).memory_available(&read_file);
    min_known(host, cgroup).unwrap_or(u64::MAX)
}

/// The CPUs left by `affinity` and a cgroup `quota` (in CPUs), at least 1.
fn cpus_within(affinity: usize, quota: Option<f64>) -> usize {
    let cpus = affinity.max(1);
    quota.map_or(cpus, |q| cpus.min(cpus_from_quota(q)))
}

/// `ceil(quota)`, at least 1.
fn cpus_from_quota(quota: f64) -> usize {
    if quota.is_finite() && quota > 1.0 {
        // The quota is at most a few thousand CPUs; the cast saturates anyway.
        quota.ceil() as usize
    } else {
        1
    }
}

/// The smaller of two numbers where either may be unknown.
fn min_known<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
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

/// The host's available memory in bytes from `/proc/meminfo`: `MemAvailable`,
/// or `MemFree` on kernels older than 3.14 that lack it.
fn parse_meminfo_available(contents: &str) -> Option<u64> {
    meminfo_field(contents, "MemAvailable").or_else(|| meminfo_field(contents, "MemFree"))
}

/// One `Key:   123 kB` line of `/proc/meminfo`, in bytes.
fn meminfo_field(contents: &str, key: &str) -> Option<u64> {
    contents.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        if name.trim() != key {
            return None;
        }
        let mut fields = rest.split_whitespace();
        let n: u64 = fields.next()?.parse().ok()?;
        match fields.next() {
            Some("kB") | None => n.checked_mul(1024),
            Some(_) => None,
        }
    })
}

/// A cgroup v2 `memory.max` in bytes, or `None` for `max` (no limit) and for
/// contents that do not parse.
fn parse_memory_max(contents: &str) -> Option<u64> {
    parse_bytes(contents)
}

/// A cgroup v1 `memory.limit_in_bytes`, or `None` for an unset limit (a huge
/// number) and for contents that do not parse.
fn parse_memory_limit_v1(contents: &str) -> Option<u64> {
    parse_bytes(contents).filter(|&n| n < V1_NO_MEMORY_LIMIT)
}

/// A file that holds one number of bytes (`memory.current`,
/// `memory.usage_in_bytes`, ...).
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

/// The process's cgroups, from `/proc/self/cgroup`.
#[derive(Debug, Default, PartialEq, Eq)]
struct CgroupPaths {
    /// The cgroup v2 path (the `0::/path` line).
    unified: Option<String>,
    /// The cgroup v1 lines: the controllers of a hierarchy and the path in it.
    v1: Vec<(Vec<String>, String)>,
}

impl CgroupPaths {
    /// The path in the v1 hierarchy that has `controller`.
    fn v1(&self, controller: &str) -> Option<&str> {
        self.v1
            .iter()
            .find(|(controllers, _)| controllers.iter().any(|c| c == controller))
            .map(|(_, path)| path.as_str())
    }
}

/// Parses `/proc/self/cgroup`: lines of `hierarchy-id:controllers:path`.
/// Lines that do not have that shape are skipped.
fn parse_cgroup_path(contents: &str) -> CgroupPaths {
    let mut paths = CgroupPaths::default();
    for line in contents.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !path.starts_with('/') {
            continue;
        }
        if id == "0" && controllers.is_empty() {
            paths.unified = Some(path.to_owned());
        } else if !controllers.is_empty() {
            let controllers = controllers.split(',').map(str::to_owned).collect();
            paths.v1.push((controllers, path.to_owned()));
        }
    }
    paths
}

/// One cgroup mount, from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CgroupMount {
    /// The cgroup path that appears at the mount point.
    root: String,
    /// Where it is mounted.
    point: PathBuf,
    /// `true` for `cgroup2`, `false` for a v1 `cgroup` hierarchy.
    v2: bool,
    /// The super options; for v1 they name the controllers.
    options: Vec<String>,
}

/// Parses the cgroup mounts out of `/proc/self/mountinfo`:
/// `id parent major:minor root point options [optional...] - fstype source super-options`.
/// Other mounts and lines that do not have that shape are skipped.
fn parse_mountinfo(contents: &str) -> Vec<CgroupMount> {
    contents
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let dash = fields.iter().skip(6).position(|f| *f == "-")? + 6;
            let (root, point) = (fields.get(3)?, fields.get(4)?);
            let fstype = *fields.get(dash + 1)?;
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            let options = fields
                .get(dash + 3)
                .map(|o| o.split(',').map(str::to_owned).collect())
                .unwrap_or_default();
            Some(CgroupMount {
                root: unescape(root),
                point: PathBuf::from(unescape(point)),
                v2,
                options,
            })
        })
        .collect()
}

/// Undoes mountinfo's octal escapes (`\040` for a space, ...).
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        if let Some(b) = octal {
            out.push(b);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directories to read for a cgroup `path` in a hierarchy mounted at
/// `mount`: the cgroup's own directory, then each parent up to the mount
/// point. A path outside the mount's root (as a container may see its own
/// cgroup) reads the mount point alone.
fn cgroup_dirs(mount: &CgroupMount, path: &str) -> Vec<PathBuf> {
    let leaf = match Path::new(path).strip_prefix(&mount.root) {
        Ok(rest) => mount.point.join(rest),
        Err(_) => mount.point.clone(),
    };
    leaf.ancestors()
        .take_while(|dir| dir.starts_with(&mount.point))
        .map(Path::to_path_buf)
        .collect()
}

/// The directories of this process's cgroups, leaf first.
#[derive(Debug, Default, PartialEq, Eq)]
struct Cgroup {
    v2: Vec<PathBuf>,
    cpu_v1: Vec<PathBuf>,
    memory_v1: Vec<PathBuf>,
}

impl Cgroup {
    /// Finds the cgroup from `/proc/self/cgroup` and `/proc/self/mountinfo`,
    /// taking the common mounts under `/sys/fs/cgroup` when mountinfo names
    /// none.
    fn find(read: Read<'_>) -> Self {
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
    fn cpu_quota(&self, read: Read<'_>) -> Option<f64> {
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
    fn memory_available(&self, read: Read<'_>) -> Option<u64> {
        let v2 = self.v2.iter().filter_map(|dir| {
            let limit = parse_memory_max(&read(&dir.join("memory.max"))?)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Computer, SystemComputer};
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
    fn a_quota_rounds_up_and_caps_the_affinity_count() {
        assert_eq!(cpus_within(8, Some(1.5)), 2);
        assert_eq!(cpus_within(8, Some(2.0)), 2);
        assert_eq!(cpus_within(8, Some(0.1)), 1);
        assert_eq!(cpus_within(2, Some(16.0)), 2);
        assert_eq!(cpus_within(8, None), 8);
        assert_eq!(cpus_within(0, None), 1);
        assert_eq!(cpus_within(4, Some(f64::NAN)), 1);
    }

    #[test]
    fn meminfo_reads_mem_available_in_bytes() {
        let meminfo = "MemTotal:       32768000 kB\nMemFree:         1000000 kB\nMemAvailable:   24441116 kB\nBuffers:          100 kB\n";
        assert_eq!(parse_meminfo_available(meminfo), Some(24_441_116 * 1024));
    }

    #[test]
    fn meminfo_without_mem_available_falls_back_to_mem_free() {
        let meminfo = "MemTotal:       32768000 kB\nMemFree:         1000000 kB\n";
        assert_eq!(parse_meminfo_available(meminfo), Some(1_000_000 * 1024));
    }

    #[test]
    fn meminfo_of_garbage_or_empty_is_unknown() {
        assert_eq!(parse_meminfo_available(""), None);
        assert_eq!(parse_meminfo_available("MemAvailable: lots kB\n"), None);
        assert_eq!(parse_meminfo_available("MemAvailable: 12 MB\n"), None);
        assert_eq!(parse_meminfo_available("MemAvailableX: 12 kB\n"), None);
        assert_eq!(parse_meminfo_available("no colons here"), None);
        let huge = format!("MemAvailable: {} kB\n", u64::MAX);
        assert_eq!(parse_meminfo_available(&huge), None);
    }

    #[test]
    fn memory_max_reads_bytes_and_max_is_no_limit() {
        assert_eq!(parse_memory_max("2147483648\n"), Some(2 * GIB));
        assert_eq!(parse_memory_max("max\n"), None);
        assert_eq!(parse_memory_max(""), None);
        assert_eq!(parse_memory_max("2G"), None);
        assert_eq!(parse_memory_max("-1"), None);
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
    fn cgroup_file_reads_v2_and_v1_lines() {
        let paths = parse_cgroup_path(
            "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/init.scope\n0::/user.slice/app.scope\n",
        );
        assert_eq!(paths.unified.as_deref(), Some("/user.slice/app.scope"));
        assert_eq!(paths.v1("memory"), Some("/docker/abc"));
        assert_eq!(paths.v1("cpu"), Some("/docker/abc"));
        assert_eq!(paths.v1("cpuacct"), Some("/docker/abc"));
        assert_eq!(paths.v1("pids"), None);
    }

    #[test]
    fn cgroup_file_of_pure_v2_has_no_v1() {
        let paths = parse_cgroup_path("0::/\n");
        assert_eq!(paths.unified.as_deref(), Some("/"));
        assert!(paths.v1.is_empty());
    }

    #[test]
    fn cgroup_file_of_garbage_or_empty_is_empty() {
        assert_eq!(parse_cgroup_path(""), CgroupPaths::default());
        assert_eq!(
            parse_cgroup_path("garbage\n::\n1:cpu\n2:cpu:relative"),
            CgroupPaths::default()
        );
    }

    #[test]
    fn cgroup_path_may_hold_colons() {
        let paths = parse_cgroup_path("0::/a:b\n");
        assert_eq!(paths.unified.as_deref(), Some("/a:b"));
    }

    #[test]
    fn mountinfo_finds_cgroup_mounts() {
        let mounts = parse_mountinfo(
            "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
             31 23 0:28 / /sys/fs/cgroup rw,relatime shared:9 - tmpfs tmpfs rw,mode=755\n\
             32 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:10 master:2 - cgroup cgroup rw,cpu,cpuacct\n\
             41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n\
             garbage line\n",
        );
        assert_eq!(
            mounts,
            vec![
                CgroupMount {
                    root: "/docker/abc".into(),
                    point: "/sys/fs/cgroup/cpu,cpuacct".into(),
                    v2: false,
                    options: vec!["rw".into(), "cpu".into(), "cpuacct".into()],
                },
                CgroupMount {
                    root: "/".into(),
                    point: "/sys/fs/cgroup/unified".into(),
                    v2: true,
                    options: vec!["rw".into(), "nsdelegate".into()],
                },
            ]
        );
        assert!(parse_mountinfo("").is_empty());
    }

    #[test]
    fn mountinfo_unescapes_spaces() {
        let mounts = parse_mountinfo("41 31 0:38 / /mnt/my\\040cgroup rw - cgroup2 cgroup2 rw\n");
        assert_eq!(mounts[0].point, PathBuf::from("/mnt/my cgroup"));
        assert_eq!(unescape("a\\134b\\"), "a\\b\\");
        assert_eq!(unescape("\\09x"), "\\09x");
    }

    #[test]
    fn cgroup_dirs_walk_up_to_the_mount_point() {
        let mount = CgroupMount {
            root: "/".into(),
            point: "/sys/fs/cgroup".into(),
            v2: true,
            options: vec![],
        };
        assert_eq!(
            cgroup_dirs(&mount, "/user.slice/app.scope"),
            vec![
                PathBuf::from("/sys/fs/cgroup/user.slice/app.scope"),
                PathBuf::from("/sys/fs/cgroup/user.slice"),
                PathBuf::from("/sys/fs/cgroup"),
            ]
        );
        assert_eq!(
            cgroup_dirs(&mount, "/"),
            vec![PathBuf::from("/sys/fs/cgroup")]
        );
    }

    #[test]
    fn cgroup_dirs_strip_the_mount_root() {
        let mount = CgroupMount {
            root: "/docker/abc".into(),
            point: "/sys/fs/cgroup/memory".into(),
            v2: false,
            options: vec!["memory".into()],
        };
        assert_eq!(
            cgroup_dirs(&mount, "/docker/abc"),
            vec![PathBuf::from("/sys/fs/cgroup/memory")]
        );
        assert_eq!(
            cgroup_dirs(&mount, "/docker/abc/job"),
            vec![
                PathBuf::from("/sys/fs/cgroup/memory/job"),
                PathBuf::from("/sys/fs/cgroup/memory"),
            ]
        );
        // A path outside the root: the mount point is the best guess.
        assert_eq!(
            cgroup_dirs(&mount, "/elsewhere"),
            vec![PathBuf::from("/sys/fs/cgroup/memory")]
        );
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
        assert_eq!(cpus_within(8, cgroup.cpu_quota(&read)), 3);
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

    #[test]
    fn min_known_takes_the_smaller_known_value() {
        assert_eq!(min_known(Some(3), Some(2)), Some(2));
        assert_eq!(min_known(Some(3), None), Some(3));
        assert_eq!(min_known(None, Some(2)), Some(2));
        assert_eq!(min_known::<u64>(None, None), None);
    }

    #[test]
    fn this_machine_has_a_cpu_and_free_memory() {
        let computer = SystemComputer;
        let cpus = computer.available_parallelism();
        assert!(cpus >= 1);
        let affinity = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert!(cpus <= affinity);
        assert!(computer.available_memory() > 0);
    }
}
