//! The machine's GPUs through NVIDIA's management library, loaded when
//! first asked for (`libnvidia-ml.so.1`, which the driver installs): a
//! machine without the driver runs everything else as before and reports
//! why it has no GPUs.

use std::sync::OnceLock;

use nvml_wrapper::Nvml;
use nvml_wrapper::enums::device::UsedGpuMemory;

use super::gpu::{Gpu, GpuError, GpuProcess};

/// The library, loaded once; or why it could not be.
fn nvml() -> Result<&'static Nvml, GpuError> {
    static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| {
        Nvml::init().map_err(|e| format!("NVIDIA's management library (libnvidia-ml.so.1, installed with the driver) could not be loaded: {e}"))
    })
    .as_ref()
    .map_err(|e| GpuError(e.clone()))
}

/// Every device, or each MIG instance of a device in MIG mode, with its
/// memory and processes now.
pub(super) fn read() -> Result<Vec<Gpu>, GpuError> {
    let nvml = nvml()?;
    let failed = |what: &str, e: nvml_wrapper::error::NvmlError| GpuError(format!("{what}: {e}"));
    let count = nvml
        .device_count()
        .map_err(|e| failed("counting the GPUs", e))?;
    let mut gpus = Vec::new();
    for index in 0..count {
        let device = nvml
            .device_by_index(index)
            .map_err(|e| failed("opening a GPU", e))?;
        let name = device.name().unwrap_or_default();
        let mig = device.mig_mode().is_ok_and(|m| m.current == 1);
        if !mig {
            gpus.push(describe(&device, index.to_string(), name)?);
            continue;
        }
        let slots = device.mig_device_count().unwrap_or(0);
        for m in 0..slots {
            // An index with no instance made is skipped.
            if let Ok(instance) = device.mig_device_by_index(m) {
                gpus.push(describe(&instance, format!("{index}:{m}"), name.clone())?);
            }
        }
    }
    Ok(gpus)
}

fn describe(device: &nvml_wrapper::Device<'_>, id: String, name: String) -> Result<Gpu, GpuError> {
    let failed = |what: &str, e: nvml_wrapper::error::NvmlError| {
        GpuError(format!("{what} of GPU {id}: {e}"))
    };
    let uuid = device.uuid().map_err(|e| failed("the UUID", e))?;
    let memory = device.memory_info().map_err(|e| failed("the memory", e))?;
    let processes = device
        .running_compute_processes()
        .unwrap_or_default()
        .into_iter()
        .map(|p| GpuProcess {
            pid: p.pid,
            group: process_group(p.pid),
            memory: match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            },
        })
        .collect();
    Ok(Gpu {
        id,
        uuid,
        name,
        total: memory.total,
        free: memory.free,
        processes,
    })
}

/// The process group of `pid`, from `/proc/<pid>/stat` (the fifth field,
/// after the name in parentheses, which may hold spaces).
fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    group_of_stat(&stat)
}

fn group_of_stat(stat: &str) -> Option<u32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_is_read_after_a_name_with_spaces() {
        let stat = "4242 (python3 -m w) S 4200 4242 4200 0 -1 4194560";
        assert_eq!(group_of_stat(stat), Some(4242));
        assert_eq!(group_of_stat("garbage"), None);
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(group_of_stat(&own).is_some());
    }

    #[test]
    fn without_the_driver_reading_says_why() {
        // This machine has no NVIDIA driver; where one is, it lists GPUs.
        match read() {
            Err(GpuError(why)) => assert!(why.contains("libnvidia-ml.so.1"), "{why}"),
            Ok(gpus) => assert!(gpus.iter().all(|g| !g.uuid.is_empty())),
        }
    }
}
