//! The GPUs a computer reports: each device or MIG instance, its memory,
//! and the memory each process holds on it.

use std::fmt;

/// A GPU, or a MIG instance of one, as the computer reads it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// Its name in kennel's configuration and `KENNEL_GPU`: the driver's
    /// index (`"0"`), or `"0:1"` for MIG instance 1 of device 0.
    pub id: String,
    /// Its UUID (`GPU-…` or `MIG-…`): what `CUDA_VISIBLE_DEVICES` names.
    pub uuid: String,
    /// Its model, as the driver names it.
    pub name: String,
    /// Its memory, in bytes.
    pub total: u64,
    /// Its memory no process holds now, in bytes.
    pub free: u64,
    /// The processes that hold memory on it now.
    pub processes: Vec<GpuProcess>,
}

/// A process that holds memory on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuProcess {
    /// Its process id.
    pub pid: u32,
    /// Its process group, where known: a worker's children are counted as
    /// the worker (a pool's process runs in a group of its own).
    pub group: Option<u32>,
    /// The bytes it holds there (`None` where the driver does not tell, as
    /// under MIG without the rights to see it).
    pub memory: Option<u64>,
}

impl GpuProcess {
    /// Whether this process is the worker `pid` or one it started.
    pub fn of(&self, pid: u32) -> bool {
        self.pid == pid || self.group == Some(pid)
    }
}

/// Why a computer reports no GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuError(pub String);

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GpuError {}
