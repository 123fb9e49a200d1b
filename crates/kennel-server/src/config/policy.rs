//! `sizing` and `eviction`: the kinds a config names, how each is read and
//! checked, and the one mapping of each to kennel's policies, used when a
//! pool is built and when a live pool is changed.

use std::fmt;

use kennel::{
    BuildError, Eviction, Fixed, Gradient, HillClimbing, IdleTimeout, NoEviction, PoolBuilder,
    Reconfig, Resources, Sizing, SystemComputer, Worker,
};
use serde::{Deserialize, Serialize};

use super::error::Refusal;
use super::human::{HumanDuration, HumanSize};
use super::learning::{LearningConfig, tuned};
use super::table::Table;
use super::written_name;

/// The most workers a `fixed` sizing may ask for.
pub(crate) const MAX_FIXED_WORKERS: usize = 1024;

/// How many workers run (`sizing`), a table with a `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case", try_from = "Table<RawSizing>")]
pub(crate) enum SizingConfig {
    /// `{ kind = "fixed", workers = N }`.
    Fixed {
        /// How many workers, 1 to 1024.
        workers: usize,
    },
    /// `{ kind = "resources", memory_per_worker = "2GiB" }`: one per CPU
    /// while each new worker finds its memory free.
    Resources {
        /// The memory one worker needs.
        memory_per_worker: HumanSize,
    },
    /// `{ kind = "hill-climbing", memory_per_worker = "2GiB" }`: 2 first,
    /// then as many as each add at least 10% more jobs per second.
    HillClimbing {
        /// The memory one worker needs.
        memory_per_worker: HumanSize,
        /// The window, the pause bounds, the seed.
        #[serde(flatten)]
        learning: LearningConfig,
    },
    /// `{ kind = "gradient", memory_per_worker = "2GiB" }`: 2 first, then as
    /// many as keep a job's time at most 1.5 × its time with 2 workers.
    Gradient {
        /// The memory one worker needs.
        memory_per_worker: HumanSize,
        /// The window, the pause bounds, the seed.
        #[serde(flatten)]
        learning: LearningConfig,
    },
}

impl fmt::Display for SizingConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Self::Fixed { workers } = self {
            return write!(f, "fixed, {workers} worker(s)");
        }
        // The kind and the memory per worker as a config writes them.
        let written = serde_json::to_value(self).unwrap_or_default();
        let text = |key: &str| written[key].as_str().unwrap_or_default().to_owned();
        write!(
            f,
            "{}, {} per worker",
            text("kind"),
            text("memory_per_worker")
        )
    }
}

/// When idle workers close (`eviction`), a table with a `kind`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    try_from = "Table<RawEviction>"
)]
pub(crate) enum EvictionConfig {
    /// `{ kind = "none" }`: idle workers stay until the pool closes (the
    /// default).
    #[default]
    None,
    /// `{ kind = "idle-timeout", after = "5m", keep = 1 }`.
    IdleTimeout {
        /// Idle time before a worker is let go.
        after: HumanDuration,
        /// Never evict below this many running workers (default 0).
        keep: usize,
    },
}

impl fmt::Display for EvictionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::IdleTimeout { after, keep } => {
                write!(f, "idle-timeout after {after}, keep {keep}")
            }
        }
    }
}

/// The kinds of sizing, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
enum SizingKind {
    Fixed,
    Resources,
    HillClimbing,
    Gradient,
}

/// A `sizing` table as written: one flat table, so that a bad value is
/// reported at its own key (`sizing.workers`), then checked against its kind.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSizing {
    kind: SizingKind,
    #[serde(default)]
    workers: Option<usize>,
    #[serde(default)]
    memory_per_worker: Option<HumanSize>,
    #[serde(default)]
    window_jobs: Option<i64>,
    #[serde(default)]
    window_time: Option<HumanDuration>,
    #[serde(default)]
    quick_windows: Option<bool>,
    #[serde(default)]
    min_pause: Option<i64>,
    #[serde(default)]
    max_pause: Option<i64>,
    #[serde(default)]
    seed: Option<i64>,
}

impl RawSizing {
    /// The learning sizings' keys, taken out of the table.
    fn learning(&mut self) -> LearningConfig {
        LearningConfig {
            window_jobs: self.window_jobs.take(),
            window_time: self.window_time.take(),
            quick_windows: self.quick_windows.take(),
            min_pause: self.min_pause.take(),
            max_pause: self.max_pause.take(),
            seed: self.seed.take(),
        }
    }
}

impl TryFrom<Table<RawSizing>> for SizingConfig {
    type Error = String;

    fn try_from(Table(mut raw): Table<RawSizing>) -> Result<Self, String> {
        let learning = raw.learning();
        if learning != LearningConfig::default()
            && !matches!(raw.kind, SizingKind::HillClimbing | SizingKind::Gradient)
        {
            return Err(format!(
                "`{}` does not apply to kind \"{}\" (allowed: with kind \"hill-climbing\" or \"gradient\")",
                learning.keys()[0],
                written_name(&raw.kind)
            ));
        }
        match raw {
            RawSizing {
                kind: SizingKind::Fixed,
                workers: Some(workers),
                memory_per_worker: None,
                ..
            } => Ok(Self::Fixed { workers }),
            RawSizing {
                kind: SizingKind::Fixed,
                memory_per_worker: Some(_),
                ..
            } => Err("`memory_per_worker` does not apply to kind \"fixed\" (allowed: `workers`)".into()),
            RawSizing {
                kind: SizingKind::Fixed,
                ..
            } => Err("kind \"fixed\" needs `workers` (allowed: 1 to 1024), such as { kind = \"fixed\", workers = 2 }".into()),
            RawSizing {
                kind,
                memory_per_worker: Some(memory_per_worker),
                workers: None,
                ..
            } => Ok(match kind {
                SizingKind::Resources => Self::Resources { memory_per_worker },
                SizingKind::HillClimbing => Self::HillClimbing {
                    memory_per_worker,
                    learning,
                },
                SizingKind::Gradient => Self::Gradient {
                    memory_per_worker,
                    learning,
                },
                SizingKind::Fixed => unreachable!("matched above"),
            }),
            RawSizing {
                kind,
                workers: Some(_),
                ..
            } => Err(format!(
                "`workers` does not apply to kind \"{}\" (allowed: `memory_per_worker`)",
                written_name(&kind)
            )),
            RawSizing { kind, .. } => Err(format!(
                "kind \"{0}\" needs `memory_per_worker`, such as {{ kind = \"{0}\", memory_per_worker = \"2GiB\" }}",
                written_name(&kind)
            )),
        }
    }
}

/// The kinds of eviction, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum EvictionKind {
    None,
    IdleTimeout,
}

/// An `eviction` table as written (see [`RawSizing`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEviction {
    kind: EvictionKind,
    #[serde(default)]
    after: Option<HumanDuration>,
    #[serde(default)]
    keep: Option<usize>,
}

impl TryFrom<Table<RawEviction>> for EvictionConfig {
    type Error = String;

    fn try_from(Table(raw): Table<RawEviction>) -> Result<Self, String> {
        match raw {
            RawEviction {
                kind: EvictionKind::None,
                after: None,
                keep: None,
            } => Ok(Self::None),
            RawEviction {
                kind: EvictionKind::None,
                ..
            } => Err("`after` and `keep` do not apply to kind \"none\" (allowed: { kind = \"none\" })".into()),
            RawEviction {
                kind: EvictionKind::IdleTimeout,
                after: Some(after),
                keep,
            } => Ok(Self::IdleTimeout {
                after,
                keep: keep.unwrap_or(0),
            }),
            RawEviction {
                kind: EvictionKind::IdleTimeout,
                after: None,
                ..
            } => Err("kind \"idle-timeout\" needs `after`, such as { kind = \"idle-timeout\", after = \"5m\", keep = 1 }".into()),
        }
    }
}

impl SizingConfig {
    /// Checks the values kennel leaves to the service: `workers` within
    /// 1 to [`MAX_FIXED_WORKERS`], a `memory_per_worker` above 0.
    pub(crate) fn check(&self) -> Result<(), Refusal> {
        match *self {
            Self::Fixed { workers } if workers == 0 || workers > MAX_FIXED_WORKERS => Err((
                "sizing.workers".into(),
                format!("{workers} is out of range (allowed: 1 to {MAX_FIXED_WORKERS})"),
            )),
            Self::Resources { memory_per_worker }
            | Self::HillClimbing {
                memory_per_worker, ..
            }
            | Self::Gradient {
                memory_per_worker, ..
            } if memory_per_worker.0 == 0 =>
            {
                Err((
                    "sizing.memory_per_worker".into(),
                    "0 bytes: each worker needs some memory (allowed: 1 byte or more, such as \"2GiB\")"
                        .into(),
                ))
            }
            Self::HillClimbing { learning, .. } | Self::Gradient { learning, .. } => {
                learning.check()
            }
            _ => Ok(()),
        }
    }

    /// Gives `to` the sizing this config names.
    pub(crate) fn apply<P: Policies>(self, to: P) -> P {
        match self {
            Self::Fixed { workers } => to.with_sizing(Fixed(workers)),
            Self::Resources { memory_per_worker } => {
                to.with_sizing(Resources::new(memory_per_worker.0, SystemComputer))
            }
            Self::HillClimbing {
                memory_per_worker,
                learning,
            } => to.with_sizing(tuned!(
                learning,
                HillClimbing::new(memory_per_worker.0, SystemComputer)
            )),
            Self::Gradient {
                memory_per_worker,
                learning,
            } => to.with_sizing(tuned!(
                learning,
                Gradient::new(memory_per_worker.0, SystemComputer)
            )),
        }
    }
}

impl EvictionConfig {
    /// Checks it as kennel does when it takes it: `after` above 0 and at
    /// most [`kennel::MAX_DURATION`].
    pub(crate) fn check(self) -> Result<(), Refusal> {
        match self {
            Self::None => Ok(()),
            Self::IdleTimeout { after, .. } => IdleTimeout::new(after.0)
                .map(drop)
                .map_err(super::error::refusal),
        }
    }

    /// Gives `to` the eviction this config names.
    ///
    /// # Errors
    ///
    /// kennel's [`BuildError`] naming `eviction.after` when it is out of
    /// range; a config read by [`Config::parse`](super::Config::parse) or a
    /// body read by [`ReconfigBody::from_json`](super::ReconfigBody::from_json)
    /// was refused for it already.
    pub(crate) fn apply<P: Policies>(self, to: P) -> Result<P, BuildError> {
        Ok(match self {
            Self::None => to.with_eviction(NoEviction),
            Self::IdleTimeout { after, keep } => {
                to.with_eviction(IdleTimeout::new(after.0)?.keep(keep))
            }
        })
    }
}

/// What takes a sizing and an eviction: a pool's builder, a reconfiguration
/// of a live pool.
pub(crate) trait Policies: Sized {
    /// With this sizing.
    #[must_use]
    fn with_sizing(self, sizing: impl Sizing) -> Self;
    /// With this eviction.
    #[must_use]
    fn with_eviction(self, eviction: impl Eviction) -> Self;
}

impl<W: Worker> Policies for PoolBuilder<W> {
    fn with_sizing(self, sizing: impl Sizing) -> Self {
        self.sizing(sizing)
    }
    fn with_eviction(self, eviction: impl Eviction) -> Self {
        self.eviction(eviction)
    }
}

impl Policies for Reconfig {
    fn with_sizing(self, sizing: impl Sizing) -> Self {
        self.sizing(sizing)
    }
    fn with_eviction(self, eviction: impl Eviction) -> Self {
        self.eviction(eviction)
    }
}
