//! GPUs per worker: how much of a GPU each worker of a pool gets
//! ([`GpusPerWorker`]), the device a worker was given ([`GpuPlace`]), and
//! the placement of workers on the computer's GPUs ([`placer`]).

pub(crate) mod placer;

/// How much of a GPU each worker of a pool gets (the `gpus_per_worker`
/// option).
///
/// In TOML, `gpus_per_worker = 1` (a device to itself) or
/// `gpus_per_worker = { share = 0.5, memory = "20GiB" }` (a share of one,
/// and the bytes of its memory the worker needs free before it starts).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(untagged)
)]
pub enum GpusPerWorker {
    /// This many whole devices for each worker: 1 is allowed (a worker's
    /// device is its own; one worker per device).
    Devices(u32),
    /// A share of a device: `1 / share` workers at most on one device, each
    /// starting only where `memory` bytes are free as measured, beside what
    /// the workers already there reserved and have not yet taken.
    Share {
        /// The share of a device, above 0 and at most 1.
        share: f64,
        /// The bytes of the device's memory each worker needs.
        #[cfg_attr(feature = "serde", serde(with = "reserved_serde"))]
        memory: u64,
    },
}

// `share` is checked finite when the options are.
impl Eq for GpusPerWorker {}

impl GpusPerWorker {
    /// How many workers one device takes.
    pub fn per_device(self) -> usize {
        match self {
            Self::Devices(_) => 1,
            // 0.5 -> 2; 0.3 -> 3 (within rounding of the float).
            Self::Share { share, .. } => ((1.0 / share) + 1e-9).floor().max(1.0) as usize,
        }
    }

    /// The bytes a worker needs free on a device to start there.
    pub fn memory(self) -> u64 {
        match self {
            Self::Devices(_) => 0,
            Self::Share { memory, .. } => memory,
        }
    }

    /// Checks the value: what is wrong, and what is allowed.
    pub(crate) fn check(self) -> Result<(), String> {
        const ALLOWED: &str =
            "allowed: 1, or { share = 0.5, memory = \"20GiB\" } for a share of one device";
        match self {
            Self::Devices(1) => Ok(()),
            Self::Devices(n) => Err(format!("{n} devices per worker ({ALLOWED})")),
            Self::Share { share, .. } if !(share > 0.0 && share <= 1.0) => Err(format!(
                "a share of {share} ({ALLOWED}; the share above 0 and at most 1)"
            )),
            Self::Share { memory: 0, .. } => Err(format!(
                "a share that needs 0 bytes ({ALLOWED}; memory: the bytes each worker needs, 1 or more)"
            )),
            Self::Share { .. } => Ok(()),
        }
    }
}

/// The GPU a worker was placed on ([`SlotInfo::gpu`](crate::SlotInfo::gpu)).
/// A process worker is told it in `CUDA_VISIBLE_DEVICES` (the UUID) and
/// `KENNEL_GPU` (the id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPlace {
    /// The device's id (`"0"`, or `"0:1"` for a MIG instance).
    pub id: String,
    /// Its UUID.
    pub uuid: String,
}

/// A worker's GPU, as its row shows it: where it runs, and the memory its
/// processes hold there as last measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuUse {
    /// The device.
    pub place: GpuPlace,
    /// Bytes its processes hold there (`None` until measured, or where the
    /// driver does not tell).
    pub memory: Option<u64>,
}

#[cfg(feature = "serde")]
mod reserved_serde {
    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        crate::size_serde::serialize(&Some(*v), s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        crate::size_serde::deserialize(d)?
            .ok_or_else(|| serde::de::Error::custom("a share needs its memory, such as \"20GiB\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_gives_the_workers_a_device_takes() {
        assert_eq!(GpusPerWorker::Devices(1).per_device(), 1);
        let share = |share| GpusPerWorker::Share { share, memory: 1 };
        assert_eq!(share(0.5).per_device(), 2);
        assert_eq!(share(0.3).per_device(), 3);
        assert_eq!(share(1.0).per_device(), 1);
        assert_eq!(share(0.25).per_device(), 4);
        assert!(share(0.0).check().unwrap_err().contains("above 0"));
        assert!(share(f64::NAN).check().is_err());
        assert!(share(1.5).check().is_err());
        assert!(
            GpusPerWorker::Devices(2)
                .check()
                .unwrap_err()
                .contains("allowed: 1")
        );
        assert!(
            GpusPerWorker::Share {
                share: 0.5,
                memory: 0
            }
            .check()
            .is_err()
        );
    }
}
