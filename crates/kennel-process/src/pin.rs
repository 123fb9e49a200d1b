//! CPU pinning ([`CoprocessSpec::pin`](crate::CoprocessSpec::pin)): the
//! share of the CPUs each worker of a pool is bound to, out of those this
//! process may use (its affinity mask within its cgroup's cpuset), and the
//! kernel's CPU list format. The mask itself is set in the child before it
//! runs its program (`deathsig.rs`).

use std::path::Path;

/// The CPUs the worker of `slot` is bound to, when each worker gets
/// `threads` of the `allowed` CPUs (sorted, without repeats): those from the
/// `slot × threads`-th on, wrapping around; `None` when it gets them all.
pub(crate) fn share(allowed: &[usize], slot: usize, threads: usize) -> Option<Vec<usize>> {
    let n = allowed.len();
    if n == 0 || threads >= n {
        return None;
    }
    let threads = threads.max(1);
    let first = slot.wrapping_mul(threads) % n;
    let mut cpus: Vec<usize> = (0..threads).map(|j| allowed[(first + j) % n]).collect();
    cpus.sort_unstable();
    Some(cpus)
}

/// The CPUs this process may run on: its affinity mask, within its cgroup's
/// cpuset when one is readable (the mask alone when the two do not meet).
pub(crate) fn allowed_cpus() -> Vec<usize> {
    let mask = affinity();
    match cgroup_cpuset() {
        Some(cpuset) => {
            let both: Vec<usize> = mask
                .iter()
                .copied()
                .filter(|c| cpuset.contains(c))
                .collect();
            if both.is_empty() { mask } else { both }
        }
        None => mask,
    }
}

/// This process's affinity mask (where it cannot be read, the first CPUs,
/// as many as it may use).
fn affinity() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    if let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        let cpus = 0..nix::sched::CpuSet::count();
        return cpus.filter(|&c| set.is_set(c).unwrap_or(false)).collect();
    }
    (0..std::thread::available_parallelism().map_or(1, usize::from)).collect()
}

/// The cpuset of this process's cgroup, if one can be read.
fn cgroup_cpuset() -> Option<Vec<usize>> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let path = path.trim_start_matches('/');
        let file = if id == "0" && controllers.is_empty() {
            Path::new("/sys/fs/cgroup")
                .join(path)
                .join("cpuset.cpus.effective")
        } else if controllers.split(',').any(|c| c == "cpuset") {
            Path::new("/sys/fs/cgroup/cpuset")
                .join(path)
                .join("cpuset.effective_cpus")
        } else {
            continue;
        };
        if let Some(cpus) = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| parse_cpu_list(&text))
        {
            return Some(cpus);
        }
    }
    None
}

/// Reads a kernel CPU list such as `0-3,8,10-11` (sorted, without
/// repeats); `None` when it is empty or not one.
pub(crate) fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    /// No machine has more; a list that names more is not believed.
    const MOST: usize = 1 << 16;
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi): (usize, usize) = match part.split_once('-') {
            Some((lo, hi)) => (lo.trim().parse().ok()?, hi.trim().parse().ok()?),
            None => {
                let cpu = part.trim().parse().ok()?;
                (cpu, cpu)
            }
        };
        if lo > hi || hi >= MOST {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then_some(cpus)
}

/// Writes CPUs as the kernel does (`0-3,8`).
pub(crate) fn cpu_list(cpus: &[usize]) -> String {
    let mut runs: Vec<String> = Vec::new();
    let mut first = 0;
    for (k, &cpu) in cpus.iter().enumerate() {
        if cpus.get(k + 1) != Some(&(cpu + 1)) {
            let lo = cpus[first];
            runs.push(if lo == cpu {
                lo.to_string()
            } else {
                format!("{lo}-{cpu}")
            });
            first = k + 1;
        }
    }
    runs.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_slot_gets_its_own_run_of_the_allowed_cpus() {
        let allowed = [2, 3, 5, 7];
        assert_eq!(share(&allowed, 0, 2), Some(vec![2, 3]));
        assert_eq!(share(&allowed, 1, 2), Some(vec![5, 7]));
        // A third worker at two CPUs each wraps around.
        assert_eq!(share(&allowed, 2, 2), Some(vec![2, 3]));
        assert_eq!(share(&allowed, 3, 1), Some(vec![7]));
        assert_eq!(share(&allowed, 1, 3), Some(vec![2, 3, 7]));
        assert_eq!(share(&allowed, 0, 4), None, "all of them: no pin");
        assert_eq!(share(&allowed, 0, 9), None);
        assert_eq!(share(&[], 0, 1), None);
    }

    #[test]
    fn a_cpu_list_reads_and_writes_as_the_kernels() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list("3,1-2,2"), Some(vec![1, 2, 3]));
        for bad in ["", "\n", "a", "3-1", "0-99999999", "1-"] {
            assert_eq!(parse_cpu_list(bad), None, "{bad:?}");
        }
        assert_eq!(cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpu_list(&[5]), "5");
        assert_eq!(cpu_list(&[]), "");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_allowed_cpus_are_the_processs_own() {
        let allowed = allowed_cpus();
        assert!(!allowed.is_empty());
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap();
        let mask = parse_cpu_list(line).unwrap();
        assert!(
            allowed.iter().all(|c| mask.contains(c)),
            "{allowed:?} within {mask:?}"
        );
    }
}
