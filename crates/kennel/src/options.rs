//! [`Options`]: the limits and timeouts a pool enforces, declared once.
//!
//! Each option is one field of the declaration below: its doc, its default
//! and the check of its range, from which the struct, its `Default`, the
//! range checks of [`Options::validate`] and the list of changed options
//! that a reconfiguration reports are made. The builder holds one
//! ([`PoolBuilder::with_options`](crate::PoolBuilder::with_options)), a
//! [`Reconfig`](crate::Reconfig) patches it, and the service reads it from
//! its TOML file (with the `serde` feature: durations in humane form,
//! `"30s"`, `"5m"`) and serves it at `/pools/{name}/config`.

use std::time::Duration;

use std::collections::BTreeMap;

use crate::dispatch::Dispatch;
use crate::error::BuildError;
use crate::gpu::GpusPerWorker;
use crate::key::{Key, KeyBinding};
use crate::tenant::{Tenant, TenantShare};

mod range;
pub use range::MIN_TIMER;
pub(crate) use range::Range;
use range::{Ranged, TIMER_WHY};

/// The longest time limit a pool takes (2,147,483,647 ms, about 24.8 days),
/// for every timer: a limit read from a config cannot overflow a timer, and
/// configurations port from pools that keep the same bound.
pub const MAX_DURATION: Duration = Duration::from_millis(2_147_483_647);

/// The most jobs `max_waiting` may let wait.
pub const MAX_WAITING: usize = 1_000_000;

/// The shortest `max_lifetime`: a worker lives at least this long, so the
/// pool's own retirements of a slot come at most once a second, whatever a
/// configuration says.
pub const MIN_LIFETIME: Duration = Duration::from_secs(1);

/// The shortest `probe_every`: an idle worker is probed at most once a
/// second.
pub const MIN_PROBE_EVERY: Duration = Duration::from_secs(1);

/// The shortest `memory_check_every`: each sample reads the memory of every
/// worker (for a process, its whole group from `/proc`), so samples come at
/// most ten times a second, whatever a configuration says.
pub const MIN_MEMORY_CHECK_EVERY: Duration = Duration::from_millis(100);

/// The most times `retry_on_crash` may run a job again.
pub const MAX_RETRIES: u32 = 10;

/// The most `max_surge` allows: workers above the capacity while their
/// replacements warm.
pub const MAX_SURGE: usize = 64;

/// The most keys `keys_per_worker` lets one worker hold.
pub const MAX_KEYS_PER_WORKER: usize = 1024;

/// How many waiting jobs each worker of the capacity allows when
/// `max_waiting` is not set.
pub(crate) const WAITING_PER_WORKER: usize = 8;

/// Declares [`Options`]: each field with its doc, its default and, after
/// a comma, its [`Range`] (of the value, or of the value inside an
/// `Option`; none: any value).
macro_rules! options {
    (
        $(#[$smeta:meta])*
        pub struct Options {
            $(
                $(#[$meta:meta])*
                $field:ident: $ty:ty = $default:expr $(, $range:expr)?;
            )*
        }
    ) => {
        $(#[$smeta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[cfg_attr(
            feature = "serde",
            derive(serde::Serialize, serde::Deserialize),
            serde(default, deny_unknown_fields)
        )]
        #[non_exhaustive]
        pub struct Options {
            $($(#[$meta])* pub $field: $ty,)*
        }

        impl Default for Options {
            fn default() -> Self {
                Self { $($field: $default,)* }
            }
        }

        impl Options {
            /// Checks each option against its own range, in the order declared.
            fn check_each(&self) -> Result<(), BuildError> {
                $($(
                    Ranged::check(&self.$field, &$range)
                        .map_err(|m| BuildError::new(stringify!($field), m))?;
                )?)*
                Ok(())
            }

            /// Each option with a range, in the order declared.
            #[cfg(test)]
            pub(crate) fn ranges() -> Vec<(&'static str, Range)> {
                vec![$($((stringify!($field), $range),)?)*]
            }

            /// The names of the options whose values differ in `other`.
            pub(crate) fn changed(&self, other: &Self) -> Vec<&'static str> {
                let mut names = Vec::new();
                $(if self.$field != other.$field {
                    names.push(stringify!($field));
                })*
                names
            }
        }
    };
}

options! {
    /// The limits and timeouts of a pool; each can change on a live pool.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kennel::Options;
    ///
    /// let mut options = Options::default();
    /// options.job_timeout = Some(Duration::from_secs(30));
    /// options.validate()?;
    /// options.job_timeout = Some(Duration::ZERO);
    /// let err = options.validate().unwrap_err();
    /// assert_eq!(err.option, "job_timeout");
    /// # Ok::<(), kennel::BuildError>(())
    /// ```
    pub struct Options {
        /// The longest a job may hold its worker; past it the job fails with
        /// `Timeout` and the worker is killed, or, if it can cancel (a
        /// JSON-RPC coprocess, a JSON-lines one with cancel lines), asked to
        /// stop and kept if it answers within `cancel_grace` (a soft limit).
        /// `None`: no limit (the default).
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        job_timeout: Option<Duration> = None, Range::time(MIN_TIMER, TIMER_WHY);
        /// The hard limit on a job, from the moment it got its worker: past it
        /// the worker is killed at once, cancel or not, progress or not.
        /// Above `job_timeout` when both are set.
        /// `None`: no hard limit.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        job_kill_after: Option<Duration> = None, Range::time(MIN_TIMER, TIMER_WHY);
        /// How long a worker asked to cancel (its job aborted or past
        /// `job_timeout`) has to answer before it is killed (default 5 s; 0
        /// kills at once, as for a worker that cannot cancel).
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        cancel_grace: Duration = Duration::from_secs(5), Range::grace("kills at once");
        /// Each progress item a job's worker sends (its
        /// [`Heartbeat`](crate::Heartbeat)) moves the job's `job_timeout`
        /// deadline to a full `job_timeout` from then: a long job that keeps
        /// saying how far it got is not cut short, one that goes quiet is.
        /// `job_kill_after` still holds. Default false.
        progress_extends_timeout: bool = false;
        /// The longest a warm-up may take; past it the worker is killed and the
        /// job waiting for it fails with `WarmupFailed`. `None`: no limit.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        warmup_timeout: Option<Duration> = None, Range::time(MIN_TIMER, TIMER_WHY);
        /// The most jobs queued for a worker; one more is rejected at once with
        /// `QueueFull`. 0 means no queue. `None`: 8 × the capacity.
        max_waiting: Option<usize> = None,
            Range::count(0, MAX_WAITING as u64, "a waiting job holds memory until it runs: the queue has a bound");
        /// Rejects at once, with `QueueWait`, a job whose projected wait is
        /// above this; rejects nothing until a first job has been timed.
        /// `None`: off.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        max_queue_wait: Option<Duration> = None, Range::time(MIN_TIMER, TIMER_WHY);
        /// The job grace: how long `close` lets lent jobs finish before it
        /// kills their workers (default 30 s). Not the grace of one worker's
        /// own close, which belongs to the worker (`kennel-process`'s
        /// `CoprocessSpec::close_grace`, the service's `worker_close_grace`).
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        job_grace: Duration = Duration::from_secs(30), Range::grace("kills at once");
        /// Which idle worker a job takes.
        dispatch: Dispatch = Dispatch::LowestSlot;
        /// Closes and replaces a worker older than this: an idle one at once, a lent one when it comes back.
        /// A warm-up or a key's load that takes half of it or more is said
        /// once (`Event::Warning`).
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        max_lifetime: Option<Duration> = None,
            Range::time(MIN_LIFETIME, "each retirement starts a worker: a slot is replaced at most once a second");
        /// Moves each worker's lifetime by a random amount in `[-j, +j]`, so
        /// workers do not all end together. Below `max_lifetime`.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        max_lifetime_jitter: Duration = Duration::ZERO;
        /// When the idle workers drop to this many, one more running slot starts
        /// ahead of demand. `None`: off.
        auto_grow_threshold: Option<usize> = None;
        /// The crash-loop breaker: after this many failed starts in a row (a
        /// failed or timed-out warm-up, an exit during it) with no worker ready
        /// between them, the pool is *broken* while no worker is ready: jobs no
        /// longer start workers of their own but fail at once with
        /// `Unavailable`, and trial starts, one at a time and 1, 2, 4 … 60 s
        /// apart, find out when the workers come up again.
        /// Default 5; `None`: never break.
        break_after_failed_starts: Option<u32> = Some(5),
            Range::count(1, u64::MAX, "0 failed starts would break a pool that never failed; none: never break");
        /// How many times [`Pool::run_idempotent`](crate::Pool::run_idempotent)
        /// runs a job again, on another worker, when its worker crashed under
        /// it (not for a job's own error, nor a timeout).
        /// Only for jobs that may run twice. Default 0.
        retry_on_crash: u32 = 0,
            Range::count(0, MAX_RETRIES as u64, "a job that crashes every worker it meets stops after a few");
        /// Retires a worker after it served this many jobs, when the last one
        /// returns: workers that leak or
        /// fragment memory start fresh. `None`: no limit.
        max_jobs: Option<u64> = None,
            Range::count(1, u64::MAX, "a worker serves at least one job; none: no limit");
        /// Moves each worker's `max_jobs` by a random whole number in
        /// `[-j, +j]`, so workers do not all retire together. Below `max_jobs`.
        max_jobs_jitter: u64 = 0;
        /// Keeps at least this many idle (or starting) workers within the
        /// running size, starting more as jobs take them and as spares exit. `None`:
        /// off. `auto_grow_threshold = n` grows one slot when idle workers
        /// drop to `n`, which is `min_idle = n + 1`.
        min_idle: Option<usize> = None;
        /// A job that holds its worker longer than this gets one `job:slow`
        /// event, with its slot and how long it has run (a lease held past it
        /// is reported the same way). `None`: off.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        slow_job: Option<Duration> = None, Range::time(MIN_TIMER, TIMER_WHY);
        /// Retires a worker whose memory passes this many bytes: an idle one at once, a lent one when
        /// its job returns; a job is never cut short. The memory is what the
        /// worker's [`Meter`](crate::Meter) reads (for a `Coprocess`, the
        /// resident memory of its whole process group, from `/proc`), sampled
        /// every `memory_check_every` and when a job returns. With the `serde`
        /// feature, a size such as `"2GiB"`. `None`: no limit.
        #[cfg_attr(feature = "serde", serde(with = "crate::size_serde"))]
        max_memory: Option<u64> = None,
            Range::count(1, u64::MAX, "bytes: 0 would retire every worker; none: no limit");
        /// How often the memory of idle and lent workers is sampled for
        /// `max_memory` (default 10 s). At least 100 ms.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        memory_check_every: Duration = Duration::from_secs(10),
            Range::time(MIN_MEMORY_CHECK_EVERY, "each sample reads every worker's memory (a process group's from `/proc`): at most ten a second");
        /// Places each worker on a GPU of its own (`1`) or on a share of one
        /// (`{ share = 0.5, memory = "20GiB" }`: at most `1 / share` workers a
        /// device, each starting only where its `memory` is free as
        /// measured), among the GPUs of the pool's computer
        /// ([`PoolBuilder::computer`](crate::PoolBuilder::computer)). The
        /// worker is told its device in [`SlotInfo::gpu`](crate::SlotInfo::gpu)
        /// (a process: `CUDA_VISIBLE_DEVICES` and `KENNEL_GPU`). The pool runs
        /// at most as many workers as the devices take; a replacement waits
        /// until the worker it replaces has let go of its memory (or warms on
        /// another device). Refused where the computer has no GPUs. `None`:
        /// workers are not placed.
        gpus_per_worker: Option<GpusPerWorker> = None;
        /// The GPUs `gpus_per_worker` places workers on, by id (`"0"`, or
        /// `"0:1"` for a MIG instance) or UUID. Empty (the default): all.
        gpus: Vec<String> = Vec::new();
        /// Retires a worker whose processes hold more than this many bytes
        /// on its GPU, as `max_memory` does for its memory (sampled every
        /// `memory_check_every`). With the `serde` feature, a size such as
        /// `"30GiB"`. Only with `gpus_per_worker`. `None`: no limit.
        #[cfg_attr(feature = "serde", serde(with = "crate::size_serde"))]
        max_gpu_memory: Option<u64> = None,
            Range::count(1, u64::MAX, "bytes: 0 would retire every worker; none: no limit");
        /// Probes each idle worker that has been idle this long with
        /// [`Worker::check`](crate::Worker::check), then again as often: a worker that fails it, or does not
        /// answer within `probe_timeout`, is retired and replaced. A probed
        /// worker is not lent meanwhile; a job takes another or waits at most
        /// the probe. At least 1 s. `None`: no probes (the default).
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        probe_every: Option<Duration> = None,
            Range::time(MIN_PROBE_EVERY, "a probe is a round trip that holds the worker: at most one a second per worker");
        /// The longest a probe may take; past it the worker counts as failed
        /// (default 5 s).
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        probe_timeout: Duration = Duration::from_secs(5), Range::time(MIN_TIMER, TIMER_WHY);
        /// Probes every worker before a job gets it: one more round trip per job; a
        /// worker that fails is retired and the job gets another.
        probe_on_lend: bool = false;
        /// How many workers above the capacity the pool may run while their
        /// replacements warm up (Kubernetes' `maxSurge`): with `n > 0`, a
        /// worker retired by `max_lifetime`, `max_jobs`, `max_memory`, a
        /// failed probe it survived or `replace_on_resize` keeps serving while
        /// its replacement warms in a *surge* place, which then takes its
        /// slot, so the pool stays at full strength through a recycle. A
        /// replacement for a known deadline (lifetime, last job) starts ahead of
        /// it by the warm-up time the pool has seen. At most `n` replacements warm at once; one whose memory
        /// does not fit is not started (`worker:surge-skipped`), and the worker
        /// is retired first, as with 0. Default 0: the capacity rule holds, and
        /// a recycle retires first, then starts (as most process managers do).
        /// At most 64.
        max_surge: usize = 0,
            Range::count(0, MAX_SURGE as u64, "each surge place is one more warm-up and one more worker's memory at once");
        /// Replaces each running worker started at another size when the size
        /// changes (its thread budget was that size's share): an idle one now,
        /// a lent one when its job returns, warm first within `max_surge` (set
        /// it: with 0 a step down may leave no worker ready for a warm-up); a
        /// learning sizing counts no window until all started at the size.
        replace_on_resize: bool = false;
        /// How workers come to hold the keys of keyed jobs: `load` (a worker
        /// loads up to `keys_per_worker` keys, the default) or `spawn` (a
        /// worker is started for one key).
        key_binding: KeyBinding = KeyBinding::Load;
        /// The most keys one worker holds at once (`load`); loading one more
        /// unloads the key it used least lately first. Default 1.
        keys_per_worker: usize = 1,
            Range::count(1, MAX_KEYS_PER_WORKER as u64, "the pool keeps each worker's keys and scans them for each job");
        /// The starvation bound of keyed jobs: a job whose key no worker
        /// holds takes only a free slot or a worker with room for a key
        /// until it has waited this long; then it claims the worker whose
        /// keys are used least (unloading a key if it must), which may first
        /// finish its job in hand or, loading a key, that load and this long
        /// again (or it takes an idle one used about as little at once, or
        /// the best idle one from twice this if the job in hand has run this
        /// long). A key whose queue would take its workers longer than this
        /// to clear gets another worker, or one whose keys have gone unused
        /// this long. Default 250 ms.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        max_key_wait: Duration = Duration::from_millis(250), Range::time(MIN_TIMER, TIMER_WHY);
        /// The most workers that hold one key at once. `None`: as many as the
        /// pool has.
        max_workers_per_key: Option<usize> = None,
            Range::count(1, u64::MAX, "a key held by no worker could never run; none: no limit");
        /// Keys kept warm: each on at least this many workers, ahead of
        /// jobs, never let go for another key while it has no more (unless
        /// every running worker holds only such keys: then a job of another
        /// key takes one once it has waited `max_key_wait`). With
        /// `load`, loaded onto idle workers as they come up (a key whose
        /// load fails is a `pool:warning`, and is not loaded ahead again
        /// until this option changes); with `spawn`, a worker is started
        /// for it in an empty running slot, else an idle worker of a key not
        /// kept warm is retired to make room (a key whose worker fails to
        /// start is said and not started ahead again, the same way).
        /// Default none.
        min_workers_per_key: BTreeMap<Key, usize> = BTreeMap::new();
        /// A memory budget for the keys the workers hold, in bytes: when the
        /// workers' memory together (sampled every `memory_check_every`, as
        /// `max_memory` reads it) passes it, idle workers unload keys, the
        /// least recently used first (with `spawn`, idle workers are
        /// retired), until the estimate fits. A key with a job running,
        /// and a key kept warm, never goes. With the `serde` feature, a
        /// size such as `"24GiB"`. `None`: no budget.
        #[cfg_attr(feature = "serde", serde(with = "crate::size_serde"))]
        key_memory_budget: Option<u64> = None,
            Range::count(1, u64::MAX, "bytes: 0 would unload every key; none: no budget");
        /// The shares of the tenants that call the pool
        /// ([`RunOptions::tenant`](crate::RunOptions::tenant)): each one's
        /// weight and limits. A tenant not named here, and a job without a
        /// tenant, weighs 1 without limits. The service fills it from its
        /// `[[tenant]]` tables, not from a pool's own keys. Default none.
        #[cfg_attr(feature = "serde", serde(skip))]
        tenants: BTreeMap<Tenant, TenantShare> = BTreeMap::new();
    }
}

impl Options {
    /// Checks every value against its range.
    ///
    /// # Errors
    ///
    /// A [`BuildError`] naming the first option out of range and what is
    /// allowed.
    pub fn validate(&self) -> Result<(), BuildError> {
        self.check_each()?;
        for (tenant, share) in &self.tenants {
            share
                .check()
                .map_err(|m| BuildError::new("tenants", format!("{tenant}: {m}")))?;
        }
        if let (Some(hard), Some(soft)) = (self.job_kill_after, self.job_timeout)
            && hard <= soft
        {
            return Err(BuildError::new(
                "job_kill_after",
                format!(
                    "{hard:?} is not above job_timeout {soft:?} (allowed: above job_timeout, or none)"
                ),
            ));
        }
        match self.max_jobs {
            Some(n) if self.max_jobs_jitter >= n => {
                return Err(BuildError::new(
                    "max_jobs_jitter",
                    format!(
                        "{} is not below max_jobs {n} (allowed: 0 up to below max_jobs)",
                        self.max_jobs_jitter
                    ),
                ));
            }
            None if self.max_jobs_jitter != 0 => {
                return Err(BuildError::new(
                    "max_jobs_jitter",
                    format!(
                        "{} without max_jobs (allowed: 0 when no max_jobs is set)",
                        self.max_jobs_jitter
                    ),
                ));
            }
            _ => {}
        }
        if let Some(g) = self.gpus_per_worker {
            g.check()
                .map_err(|m| BuildError::new("gpus_per_worker", m))?;
        } else if !self.gpus.is_empty() || self.max_gpu_memory.is_some() {
            let field = if self.gpus.is_empty() {
                "max_gpu_memory"
            } else {
                "gpus"
            };
            return Err(BuildError::new(
                field,
                "set without gpus_per_worker (allowed: only where workers are placed on GPUs)",
            ));
        }
        if let Some((key, _)) = self.min_workers_per_key.iter().find(|(_, m)| **m == 0) {
            return Err(BuildError::new(
                "min_workers_per_key",
                format!(
                    "0 workers for key {key:?} (allowed: 1 or more; leave the key out for none)"
                ),
            ));
        }
        let jitter = self.max_lifetime_jitter;
        match self.max_lifetime {
            Some(life) if jitter >= life => Err(BuildError::new(
                "max_lifetime_jitter",
                format!(
                    "{jitter:?} is not below max_lifetime {life:?} (allowed: 0 up to below max_lifetime)"
                ),
            )),
            None if !jitter.is_zero() => Err(BuildError::new(
                "max_lifetime_jitter",
                format!("{jitter:?} without max_lifetime (allowed: 0 when no max_lifetime is set)"),
            )),
            _ => Ok(()),
        }
    }

    /// The bound on waiting jobs for a pool of `capacity`: `max_waiting`,
    /// or 8 × the capacity when it is not set.
    pub fn waiting_bound(&self, capacity: usize) -> usize {
        self.max_waiting
            .unwrap_or_else(|| capacity.saturating_mul(WAITING_PER_WORKER))
    }
}

#[cfg(test)]
mod tests;
