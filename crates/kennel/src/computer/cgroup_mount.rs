//! Where this process's cgroups are: its paths in each hierarchy
//! (`/proc/self/cgroup`), where the hierarchies are mounted
//! (`/proc/self/mountinfo`), and the directories that follow from both.

use std::path::{Path, PathBuf};

/// The process's cgroups, from `/proc/self/cgroup`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct CgroupPaths {
    /// The cgroup v2 path (the `0::/path` line).
    pub(super) unified: Option<String>,
    /// The cgroup v1 lines: the controllers of a hierarchy and the path in it.
    pub(super) v1: Vec<(Vec<String>, String)>,
}

impl CgroupPaths {
    /// The path in the v1 hierarchy that has `controller`.
    pub(super) fn v1(&self, controller: &str) -> Option<&str> {
        self.v1
            .iter()
            .find(|(controllers, _)| controllers.iter().any(|c| c == controller))
            .map(|(_, path)| path.as_str())
    }
}

/// Parses `/proc/self/cgroup`: lines of `hierarchy-id:controllers:path`.
/// Lines that do not have that shape are skipped.
pub(super) fn parse_cgroup_path(contents: &str) -> CgroupPaths {
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
pub(super) struct CgroupMount {
    /// The cgroup path that appears at the mount point.
    pub(super) root: String,
    /// Where it is mounted.
    pub(super) point: PathBuf,
    /// `true` for `cgroup2`, `false` for a v1 `cgroup` hierarchy.
    pub(super) v2: bool,
    /// The super options; for v1 they name the controllers.
    pub(super) options: Vec<String>,
}

/// Parses the cgroup mounts out of `/proc/self/mountinfo`:
/// `id parent major:minor root point options [optional...] - fstype source super-options`.
/// Other mounts and lines that do not have that shape are skipped.
pub(super) fn parse_mountinfo(contents: &str) -> Vec<CgroupMount> {
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
pub(super) fn cgroup_dirs(mount: &CgroupMount, path: &str) -> Vec<PathBuf> {
    let leaf = match Path::new(path).strip_prefix(&mount.root) {
        Ok(rest) => mount.point.join(rest),
        Err(_) => mount.point.clone(),
    };
    leaf.ancestors()
        .take_while(|dir| dir.starts_with(&mount.point))
        .map(Path::to_path_buf)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
