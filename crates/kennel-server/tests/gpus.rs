//! `gpus_per_worker` in the service's config: checked against this
//! machine's GPUs when a pool is built. Where NVIDIA's driver is missing
//! (this test's usual machine), the pool is refused with the reason and a
//! config without it is as valid as ever; where it is present, `kennel
//! check` lists the devices the workers go to.

mod served;

use served::check;

/// Whether NVIDIA's driver is loaded here.
fn driver() -> bool {
    std::path::Path::new("/proc/driver/nvidia").exists()
}

#[test]
fn gpus_per_worker_is_refused_with_the_reason_where_there_is_no_gpu() {
    let dir = served::TempDir::new("gpus-check");
    let pool = "[[pool]]\nname = \"embed\"\nargv = [\"@kennel\", \"worker\", \"demo\"]\n";
    let (code, stdout, stderr) = check(&dir, &format!("{pool}gpus_per_worker = 1\n"));
    assert!(
        stdout.contains("  gpus            a device of its own per worker\n"),
        "{stdout}"
    );
    if driver() {
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.contains("    on GPU 0 "), "{stdout}");
    } else {
        assert_eq!(code, Some(2), "{stdout}");
        assert!(
            stderr.contains("invalid option `gpus_per_worker`: this machine has no GPU to place workers on: NVIDIA's management library (libnvidia-ml.so.1, installed with the driver) could not be loaded"),
            "{stderr}"
        );
        assert!(
            stdout.contains("    none here: NVIDIA's management library"),
            "{stdout}"
        );
    }
    // A value out of range is refused on any machine, before the GPUs are read.
    let (code, _, stderr) = check(
        &dir,
        &format!("{pool}gpus_per_worker = {{ share = 1.5, memory = \"20GiB\" }}\n"),
    );
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("`pool[0].gpus_per_worker`: a share of 1.5 (allowed: 1, or { share = 0.5"),
        "{stderr}"
    );
    let (code, _, stderr) = check(&dir, &format!("{pool}gpus_per_worker = 2\n"));
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("2 devices per worker (allowed: 1"),
        "{stderr}"
    );
    let (code, _, stderr) = check(&dir, &format!("{pool}max_gpu_memory = \"30GiB\"\n"));
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("`pool[0].max_gpu_memory`: set without gpus_per_worker"),
        "{stderr}"
    );
    // Everything else is unchanged.
    let (code, stdout, stderr) = check(&dir, pool);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.contains("  gpus "), "{stdout}");
}
