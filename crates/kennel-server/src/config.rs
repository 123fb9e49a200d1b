//! The TOML configuration: `[server]` and `[[pool]]` entries (pooler's config
//! file, in Rust form).
//!
//! Reading a file is two passes. Serde refuses unknown keys, values of the
//! wrong type and unknown names (`deny_unknown_fields`, kebab-case enums); a
//! second pass checks ranges and the links between keys. Every refusal is a
//! [`ConfigError`] that names the file, the key (`pool[1].job_timeout`) and
//! what is allowed.
//!
//! ```toml
//! [server]
//! listen = "127.0.0.1:7878"
//! body_limit = "1MiB"
//! token_env = "KENNEL_TOKEN"
//! shutdown_grace = "10s"
//!
//! [[pool]]
//! name = "echo"
//! argv = ["python3", "examples/workers/echo.py"]
//! startup = "parallel"
//! sizing = { kind = "fixed", workers = 2 }
//! eviction = { kind = "idle-timeout", after = "5m", keep = 1 }
//! job_timeout = "30s"
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// The port the service listens on when none is given.
pub const DEFAULT_PORT: u16 = 7878;

/// The request body limit when none is given: 1 MiB.
pub const DEFAULT_BODY_LIMIT: u64 = 1024 * 1024;

/// The largest request body limit a config may set: 1 GiB.
pub const MAX_BODY_LIMIT: u64 = 1024 * 1024 * 1024;

/// How long in-flight requests may finish at shutdown when no grace is given.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The longest time limit a config may set (2,147,483,647 ms, about 24.8
/// days), the bound kennel keeps for every timer so configurations port.
pub const MAX_DURATION: Duration = Duration::from_millis(2_147_483_647);

/// The most workers a `fixed` sizing may ask for.
pub const MAX_FIXED_WORKERS: usize = 1024;

/// The first element of an argv that stands for the `kennel` binary itself
/// (e.g. `argv = ["@kennel", "worker", "demo"]` for the built-in demo worker).
pub const SELF_EXE: &str = "@kennel";

/// A configuration error: the file, the key and what is wrong and allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, or `<built-in>` / `<request>` for a config that is not one.
    pub file: String,
    /// The key, as a path: `server.listen`, `pool[0].sizing.workers`.
    pub key: String,
    /// What is wrong, and what is allowed.
    pub message: String,
    /// Where in the file, when known (1-based line and column).
    pub line: Option<(usize, usize)>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, col)) = self.line {
            write!(f, ":{line}:{col}")?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": `{}`: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// A duration written the humane way: `"500ms"`, `"30s"`, `"5m"`, `"1h 30m"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HumanDuration(pub Duration);

const DURATION_ALLOWED: &str =
    "a number with a unit, such as \"500ms\", \"30s\", \"5m\", \"1h 30m\"";

impl FromStr for HumanDuration {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(s.trim())
            .map(Self)
            .map_err(|e| format!("invalid duration {s:?}: {e} (allowed: {DURATION_ALLOWED})"))
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HumanDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(DURATION_ALLOWED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<HumanDuration, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<HumanDuration, E> {
                Err(E::custom(format!(
                    "a bare number ({n}) has no unit (allowed: {DURATION_ALLOWED})"
                )))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<HumanDuration, E> {
                Err(E::custom(format!(
                    "a bare number ({n}) has no unit (allowed: {DURATION_ALLOWED})"
                )))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<HumanDuration, E> {
                Err(E::custom(format!(
                    "a bare number ({n}) has no unit (allowed: {DURATION_ALLOWED})"
                )))
            }
        }
        d.deserialize_any(V)
    }
}

/// A size in bytes written the humane way: `"512MiB"`, `"2GiB"`, `"1.5 GB"`,
/// or a plain number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HumanSize(pub u64);

const SIZE_ALLOWED: &str = "a size such as \"512KiB\", \"2GiB\", \"1.5 GB\", or a number of bytes";

impl FromStr for HumanSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim()
            .parse::<bytesize::ByteSize>()
            .map(|b| Self(b.as_u64()))
            .map_err(|e| format!("invalid size {s:?}: {e} (allowed: {SIZE_ALLOWED})"))
    }
}

impl fmt::Display for HumanSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", bytesize::ByteSize::b(self.0).display().iec())
    }
}

impl Serialize for HumanSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HumanSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HumanSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(SIZE_ALLOWED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<HumanSize, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<HumanSize, E> {
                Ok(HumanSize(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<HumanSize, E> {
                u64::try_from(n)
                    .map(HumanSize)
                    .map_err(|_| E::custom(format!("{n} is negative (allowed: {SIZE_ALLOWED})")))
            }
        }
        d.deserialize_any(V)
    }
}

/// The whole configuration: the server and its pools.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Config {
    /// `[server]`.
    #[serde(default)]
    pub server: ServerConfig,
    /// `[[pool]]` entries, in file order.
    #[serde(default, rename = "pool")]
    pub pools: Vec<PoolConfig>,
}

/// `[server]`: how the service listens and stops.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct ServerConfig {
    /// `listen`: the address, `"127.0.0.1:7878"` by default. `"IP"` alone
    /// takes port 7878; `"localhost:PORT"` is 127.0.0.1.
    pub listen: String,
    /// `body_limit`: the largest request body (default 1 MiB); a larger one
    /// is answered 413.
    pub body_limit: HumanSize,
    /// `token_env`: the name of an environment variable that holds a bearer
    /// token. When set, every endpoint but `/healthz` asks for
    /// `Authorization: Bearer <token>`.
    pub token_env: Option<String>,
    /// `shutdown_grace`: how long in-flight requests may finish after
    /// SIGINT/SIGTERM before the pools close (default 10 s).
    pub shutdown_grace: HumanDuration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: format!("127.0.0.1:{DEFAULT_PORT}"),
            body_limit: HumanSize(DEFAULT_BODY_LIMIT),
            token_env: None,
            shutdown_grace: HumanDuration(DEFAULT_SHUTDOWN_GRACE),
        }
    }
}

/// When workers start (`startup`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartupKind {
    /// `"on-demand"`: a worker only when a job needs one (the default).
    #[default]
    OnDemand,
    /// `"parallel"`: every running slot at once, when the pool is built.
    Parallel,
    /// `"ordered-ready"`: one after the other, each after the previous is ready.
    OrderedReady,
    /// `"leader-first"`: slot 0 alone, then the others once it is ready.
    LeaderFirst,
}

impl StartupKind {
    /// The name as written in a config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnDemand => "on-demand",
            Self::Parallel => "parallel",
            Self::OrderedReady => "ordered-ready",
            Self::LeaderFirst => "leader-first",
        }
    }
}

/// How many workers run (`sizing`), a table with a `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case", try_from = "RawSizing")]
pub enum SizingConfig {
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
    },
    /// `{ kind = "gradient", memory_per_worker = "2GiB" }`: 2 first, then as
    /// many as keep a job's time at most 1.5 × its time with 2 workers.
    Gradient {
        /// The memory one worker needs.
        memory_per_worker: HumanSize,
    },
}

impl SizingConfig {
    /// The `kind` as written in a config.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Fixed { .. } => "fixed",
            Self::Resources { .. } => "resources",
            Self::HillClimbing { .. } => "hill-climbing",
            Self::Gradient { .. } => "gradient",
        }
    }
}

impl fmt::Display for SizingConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fixed { workers } => write!(f, "fixed, {workers} worker(s)"),
            Self::Resources { memory_per_worker }
            | Self::HillClimbing { memory_per_worker }
            | Self::Gradient { memory_per_worker } => {
                write!(f, "{}, {memory_per_worker} per worker", self.kind())
            }
        }
    }
}

/// When idle workers close (`eviction`), a table with a `kind`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case", try_from = "RawEviction")]
pub enum EvictionConfig {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
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
}

impl TryFrom<RawSizing> for SizingConfig {
    type Error = String;

    fn try_from(raw: RawSizing) -> Result<Self, String> {
        match raw {
            RawSizing {
                kind: SizingKind::Fixed,
                workers: Some(workers),
                memory_per_worker: None,
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
            } => Ok(match kind {
                SizingKind::Resources => Self::Resources { memory_per_worker },
                SizingKind::HillClimbing => Self::HillClimbing { memory_per_worker },
                SizingKind::Gradient => Self::Gradient { memory_per_worker },
                SizingKind::Fixed => unreachable!("matched above"),
            }),
            RawSizing {
                kind,
                workers: Some(_),
                ..
            } => Err(format!(
                "`workers` does not apply to kind \"{}\" (allowed: `memory_per_worker`)",
                kind.as_str()
            )),
            RawSizing { kind, .. } => Err(format!(
                "kind \"{0}\" needs `memory_per_worker`, such as {{ kind = \"{0}\", memory_per_worker = \"2GiB\" }}",
                kind.as_str()
            )),
        }
    }
}

impl SizingKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Fixed => "fixed",
            Self::Resources => "resources",
            Self::HillClimbing => "hill-climbing",
            Self::Gradient => "gradient",
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

impl TryFrom<RawEviction> for EvictionConfig {
    type Error = String;

    fn try_from(raw: RawEviction) -> Result<Self, String> {
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

/// Which idle worker a job takes (`dispatch`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DispatchKind {
    /// `"lowest-slot"` (the default).
    #[default]
    LowestSlot,
    /// `"round-robin"`.
    RoundRobin,
}

/// When a worker process counts as warm (`ready`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadyKind {
    /// `"line"`: it writes `{"ready":true}` (the default).
    #[default]
    Line,
    /// `"immediate"`: as soon as it started; it writes no ready line.
    Immediate,
}

/// One `[[pool]]`: a named pool of worker processes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PoolConfig {
    /// `name`: letters, digits, `-`, `_`, `.`; unique.
    pub name: String,
    /// `argv`: the program and its arguments, never run through a shell.
    /// `"@kennel"` as the program stands for this `kennel` binary.
    pub argv: Vec<String>,
    /// `env`: variables added to the inherited environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `cwd`: the workers' directory; relative to the config file's
    /// directory (default: that directory).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// `group`: the group the pool belongs to, for `POST /groups/{group}/jobs`.
    #[serde(default)]
    pub group: Option<String>,
    /// `startup` (default `"on-demand"`).
    #[serde(default)]
    pub startup: StartupKind,
    /// `sizing` (default `{ kind = "fixed", workers = <cpus> }`).
    #[serde(default)]
    pub sizing: Option<SizingConfig>,
    /// `eviction` (default `{ kind = "none" }`).
    #[serde(default)]
    pub eviction: EvictionConfig,
    /// `dispatch` (default `"lowest-slot"`).
    #[serde(default)]
    pub dispatch: DispatchKind,
    /// `ready` (default `"line"`).
    #[serde(default)]
    pub ready: ReadyKind,
    /// `job_timeout`: the longest a job may hold its worker.
    #[serde(default)]
    pub job_timeout: Option<HumanDuration>,
    /// `warmup_timeout`: the longest a warm-up may take.
    #[serde(default)]
    pub warmup_timeout: Option<HumanDuration>,
    /// `max_waiting`: the most queued jobs (default 8 × capacity).
    #[serde(default)]
    pub max_waiting: Option<usize>,
    /// `max_queue_wait`: refuse a job whose projected wait is longer.
    #[serde(default)]
    pub max_queue_wait: Option<HumanDuration>,
    /// `max_lifetime`: replace a worker older than this.
    #[serde(default)]
    pub max_lifetime: Option<HumanDuration>,
    /// `max_lifetime_jitter`: spread each worker's lifetime by up to this
    /// much either way; below `max_lifetime`.
    #[serde(default)]
    pub max_lifetime_jitter: Option<HumanDuration>,
    /// `auto_grow_threshold`: when idle workers drop to this number, start
    /// more running slots ahead of demand.
    #[serde(default)]
    pub auto_grow_threshold: Option<usize>,
    /// `close_grace`: at close, how long lent jobs may finish (default 30 s).
    #[serde(default)]
    pub close_grace: Option<HumanDuration>,
    /// `max_reply`: the largest reply line a worker may write (default 16 MiB).
    #[serde(default)]
    pub max_reply: Option<HumanSize>,
}

impl PoolConfig {
    /// A pool entry with a name and an argv and every other key at its
    /// default.
    pub fn new<I, A>(name: impl Into<String>, argv: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<String>,
    {
        Self {
            name: name.into(),
            argv: argv.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
            group: None,
            startup: StartupKind::default(),
            sizing: None,
            eviction: EvictionConfig::default(),
            dispatch: DispatchKind::default(),
            ready: ReadyKind::default(),
            job_timeout: None,
            warmup_timeout: None,
            max_waiting: None,
            max_queue_wait: None,
            max_lifetime: None,
            max_lifetime_jitter: None,
            auto_grow_threshold: None,
            close_grace: None,
            max_reply: None,
        }
    }
}

/// The live-changeable part of a pool, the body of `PUT /pools/{name}/config`.
/// Keys and values are written as in a `[[pool]]` entry; a key left out is
/// left as it is; `null` clears an optional limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ReconfigBody {
    /// New sizing.
    #[serde(default)]
    pub sizing: Option<SizingConfig>,
    /// New eviction.
    #[serde(default)]
    pub eviction: Option<EvictionConfig>,
    /// New job timeout (`null`: none).
    #[serde(default, deserialize_with = "some_or_null")]
    pub job_timeout: Option<Option<HumanDuration>>,
    /// New warm-up timeout (`null`: none).
    #[serde(default, deserialize_with = "some_or_null")]
    pub warmup_timeout: Option<Option<HumanDuration>>,
    /// New queue bound.
    #[serde(default)]
    pub max_waiting: Option<usize>,
    /// New projected-wait bound (`null`: none).
    #[serde(default, deserialize_with = "some_or_null")]
    pub max_queue_wait: Option<Option<HumanDuration>>,
    /// New lifetime (`null`: none).
    #[serde(default, deserialize_with = "some_or_null")]
    pub max_lifetime: Option<Option<HumanDuration>>,
    /// New lifetime jitter (`"0s"`: none).
    #[serde(default)]
    pub max_lifetime_jitter: Option<HumanDuration>,
    /// New auto-grow threshold (`null`: none).
    #[serde(default, deserialize_with = "some_or_null")]
    pub auto_grow_threshold: Option<Option<usize>>,
    /// New close grace.
    #[serde(default)]
    pub close_grace: Option<HumanDuration>,
    /// New group (`null`: none).
    #[serde(default, deserialize_with = "some_or_null")]
    pub group: Option<Option<String>>,
}

/// A present key, whose value may be `null`.
fn some_or_null<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

impl ReconfigBody {
    /// Parses a JSON body, naming the key of the first bad value.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] with `file` `<request>`.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ConfigError> {
        let mut d = serde_json::Deserializer::from_slice(bytes);
        let body: Self = serde_path_to_error::deserialize(&mut d).map_err(|e| ConfigError {
            file: "<request>".into(),
            key: path_string(e.path()),
            message: e.inner().to_string(),
            line: None,
        })?;
        body.validate().map_err(|(key, message)| ConfigError {
            file: "<request>".into(),
            key,
            message,
            line: None,
        })?;
        Ok(body)
    }

    fn validate(&self) -> Result<(), (String, String)> {
        let at = |k: &str| k.to_owned();
        if let Some(s) = &self.sizing {
            check_sizing(s).map_err(|(k, m)| (format!("sizing{k}"), m))?;
        }
        if let Some(e) = &self.eviction {
            check_eviction(e).map_err(|(k, m)| (format!("eviction{k}"), m))?;
        }
        for (key, v) in [
            ("job_timeout", self.job_timeout),
            ("warmup_timeout", self.warmup_timeout),
            ("max_queue_wait", self.max_queue_wait),
            ("max_lifetime", self.max_lifetime),
        ] {
            if let Some(Some(d)) = v {
                check_limit(d).map_err(|m| (at(key), m))?;
            }
        }
        if let Some(j) = self.max_lifetime_jitter
            && j.0 > MAX_DURATION
        {
            return Err((at("max_lifetime_jitter"), out_of_range(j, true)));
        }
        if let Some(g) = self.close_grace
            && g.0 > MAX_DURATION
        {
            return Err((at("close_grace"), out_of_range(g, true)));
        }
        if let (Some(j), Some(Some(l))) = (self.max_lifetime_jitter, self.max_lifetime)
            && j >= l
        {
            return Err((
                at("max_lifetime_jitter"),
                format!("{j} is not below max_lifetime {l} (allowed: less than max_lifetime)"),
            ));
        }
        if let Some(n) = self.max_waiting {
            check_max_waiting(n).map_err(|m| (at("max_waiting"), m))?;
        }
        if let Some(Some(g)) = &self.group {
            check_name(g).map_err(|m| (at("group"), m))?;
        }
        Ok(())
    }
}

/// The most jobs a `max_waiting` may allow.
pub const MAX_WAITING: usize = 1_000_000;

/// Where a config came from, for error messages and relative paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The name used in messages.
    pub name: String,
    /// The directory that relative `cwd` values start from.
    pub dir: PathBuf,
}

impl Source {
    /// A file on disk.
    pub fn file(path: &Path) -> Self {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        Self {
            name: path.display().to_string(),
            dir,
        }
    }

    /// Text that is not a file (a test, the built-in config), with relative
    /// paths from the current directory.
    pub fn inline(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            dir: PathBuf::from("."),
        }
    }
}

impl Config {
    /// Reads and checks a config file.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the file, the key and what is allowed, for
    /// a file that cannot be read, an unknown key, a value of the wrong type
    /// or out of range.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let source = Source::file(path);
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: source.name.clone(),
            key: String::new(),
            message: format!("cannot read the file: {e}"),
            line: None,
        })?;
        Self::parse(&text, &source)
    }

    /// Parses and checks config text. Relative `cwd` values are resolved
    /// against `source.dir`.
    ///
    /// # Errors
    ///
    /// As [`load`](Self::load).
    pub fn parse(text: &str, source: &Source) -> Result<Self, ConfigError> {
        let err = |key: String, message: String, line| ConfigError {
            file: source.name.clone(),
            key,
            message,
            line,
        };
        let de = toml::Deserializer::parse(text).map_err(|e| {
            let line = e.span().map(|s| line_col(text, s.start));
            err(String::new(), e.message().trim().to_owned(), line)
        })?;
        let mut config: Self = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = path_string(e.path());
            let inner = e.into_inner();
            let line = inner.span().map(|s| line_col(text, s.start));
            err(path, inner.message().trim().to_owned(), line)
        })?;
        config
            .validate(source)
            .map_err(|(key, message)| err(key, message, None))?;
        Ok(config)
    }

    /// The config used with no file: one demo pool whose workers are this
    /// binary in its `worker demo` mode (see [`crate::demo`]).
    pub fn demo() -> Self {
        Self {
            server: ServerConfig::default(),
            pools: vec![crate::demo::pool_config()],
        }
    }

    fn validate(&mut self, source: &Source) -> Result<(), (String, String)> {
        self.server.validate()?;
        let mut names = HashSet::new();
        for (i, pool) in self.pools.iter_mut().enumerate() {
            let at = |k: &str| {
                if k.is_empty() {
                    format!("pool[{i}]")
                } else {
                    format!("pool[{i}].{k}")
                }
            };
            pool.validate(source).map_err(|(k, m)| (at(&k), m))?;
            if !names.insert(pool.name.clone()) {
                return Err((
                    at("name"),
                    format!(
                        "{:?} is already the name of another pool (allowed: a name no other pool has)",
                        pool.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The listen address.
    ///
    /// # Panics
    ///
    /// Never for a config from [`load`](Self::load) or
    /// [`parse`](Self::parse), which checked it.
    pub fn listen(&self) -> SocketAddr {
        parse_listen(&self.server.listen).expect("listen address was checked")
    }
}

impl ServerConfig {
    fn validate(&self) -> Result<(), (String, String)> {
        parse_listen(&self.listen).map_err(|m| ("server.listen".to_owned(), m))?;
        let limit = self.body_limit.0;
        if limit == 0 || limit > MAX_BODY_LIMIT {
            return Err((
                "server.body_limit".into(),
                format!(
                    "{} is out of range (allowed: 1 byte to 1 GiB)",
                    self.body_limit
                ),
            ));
        }
        if let Some(name) = &self.token_env {
            check_env_name(name).map_err(|m| ("server.token_env".to_owned(), m))?;
        }
        if self.shutdown_grace.0 > MAX_DURATION {
            return Err((
                "server.shutdown_grace".into(),
                out_of_range(self.shutdown_grace, true),
            ));
        }
        Ok(())
    }

    /// Reads the bearer token from the variable named by `token_env`.
    ///
    /// # Errors
    ///
    /// A message naming `server.token_env` when the variable is not set or
    /// is empty.
    pub fn token(&self) -> Result<Option<String>, String> {
        let Some(name) = &self.token_env else {
            return Ok(None);
        };
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => Ok(Some(v)),
            Ok(_) => Err(format!(
                "`server.token_env`: the variable {name} is empty (allowed: a variable that holds the token)"
            )),
            Err(_) => Err(format!(
                "`server.token_env`: the variable {name} is not set (allowed: a variable that holds the token)"
            )),
        }
    }
}

/// Parses a listen address: `IP:PORT`, `IP` (port 7878), `localhost[:PORT]`.
///
/// # Errors
///
/// A message with the allowed forms.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    if s == "localhost" {
        return Ok(SocketAddr::new(localhost, DEFAULT_PORT));
    }
    if let Some(port) = s.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::new(localhost, port));
    }
    Err(format!(
        "{s:?} is not an address (allowed: \"IP:PORT\" such as \"127.0.0.1:{DEFAULT_PORT}\" or \"[::1]:{DEFAULT_PORT}\", an IP alone for port {DEFAULT_PORT}, or \"localhost:PORT\")"
    ))
}

impl PoolConfig {
    fn validate(&mut self, source: &Source) -> Result<(), (String, String)> {
        let at = |k: &str| k.to_owned();
        check_name(&self.name).map_err(|m| (at("name"), m))?;
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return Err((
                at("argv"),
                "the program is missing (allowed: a list with the program first, such as [\"python3\", \"worker.py\"])".into(),
            ));
        }
        if let Some(i) = self.argv.iter().position(|a| a.contains('\0')) {
            return Err((
                format!("argv[{i}]"),
                "contains a NUL byte (allowed: any text without NUL)".into(),
            ));
        }
        for (k, v) in &self.env {
            check_env_name(k).map_err(|m| (format!("env.{k}"), m))?;
            if v.contains('\0') {
                return Err((
                    format!("env.{k}"),
                    "the value contains a NUL byte (allowed: any text without NUL)".into(),
                ));
            }
        }
        let cwd = match &self.cwd {
            Some(c) if c.is_absolute() => c.clone(),
            Some(c) => source.dir.join(c),
            None => source.dir.clone(),
        };
        if !cwd.is_dir() {
            return Err((
                at("cwd"),
                format!(
                    "{} is not a directory (allowed: an existing directory, relative to the config file's)",
                    cwd.display()
                ),
            ));
        }
        self.cwd = Some(cwd);
        if let Some(g) = &self.group {
            check_name(g).map_err(|m| (at("group"), m))?;
        }
        if let Some(s) = &self.sizing {
            check_sizing(s).map_err(|(k, m)| (format!("sizing{k}"), m))?;
        }
        check_eviction(&self.eviction).map_err(|(k, m)| (format!("eviction{k}"), m))?;
        for (key, v) in [
            ("job_timeout", self.job_timeout),
            ("warmup_timeout", self.warmup_timeout),
            ("max_queue_wait", self.max_queue_wait),
            ("max_lifetime", self.max_lifetime),
        ] {
            if let Some(d) = v {
                check_limit(d).map_err(|m| (at(key), m))?;
            }
        }
        if let Some(n) = self.max_waiting {
            check_max_waiting(n).map_err(|m| (at("max_waiting"), m))?;
        }
        match (self.max_lifetime_jitter, self.max_lifetime) {
            (Some(j), None) => {
                return Err((
                    at("max_lifetime_jitter"),
                    format!("{j} is set without max_lifetime (allowed: only with max_lifetime)"),
                ));
            }
            (Some(j), Some(l)) if j >= l => {
                return Err((
                    at("max_lifetime_jitter"),
                    format!("{j} is not below max_lifetime {l} (allowed: less than max_lifetime)"),
                ));
            }
            _ => {}
        }
        if let (Some(n), Some(SizingConfig::Fixed { workers })) =
            (self.auto_grow_threshold, self.sizing)
            && n >= workers
        {
            return Err((
                at("auto_grow_threshold"),
                format!(
                    "{n} is not below the {workers} workers of the sizing (allowed: 0 to {})",
                    workers - 1
                ),
            ));
        }
        if let Some(g) = self.close_grace
            && g.0 > MAX_DURATION
        {
            return Err((at("close_grace"), out_of_range(g, true)));
        }
        if let Some(m) = self.max_reply
            && (m.0 == 0 || m.0 > MAX_BODY_LIMIT)
        {
            return Err((
                at("max_reply"),
                format!("{m} is out of range (allowed: 1 byte to 1 GiB)"),
            ));
        }
        Ok(())
    }

    /// The argv with `@kennel` replaced by `self_exe`.
    pub fn resolved_argv(&self, self_exe: &Path) -> Vec<std::ffi::OsString> {
        self.argv
            .iter()
            .enumerate()
            .map(|(i, a)| {
                if i == 0 && a == SELF_EXE {
                    self_exe.as_os_str().to_owned()
                } else {
                    a.into()
                }
            })
            .collect()
    }
}

fn check_sizing(s: &SizingConfig) -> Result<(), (String, String)> {
    match *s {
        SizingConfig::Fixed { workers } if workers == 0 || workers > MAX_FIXED_WORKERS => Err((
            ".workers".into(),
            format!("{workers} is out of range (allowed: 1 to {MAX_FIXED_WORKERS})"),
        )),
        SizingConfig::Resources { memory_per_worker }
        | SizingConfig::HillClimbing { memory_per_worker }
        | SizingConfig::Gradient { memory_per_worker }
            if memory_per_worker.0 == 0 =>
        {
            Err((
                ".memory_per_worker".into(),
                "0 bytes: each worker needs some memory (allowed: 1 byte or more, such as \"2GiB\")"
                    .into(),
            ))
        }
        _ => Ok(()),
    }
}

fn check_eviction(e: &EvictionConfig) -> Result<(), (String, String)> {
    match *e {
        EvictionConfig::IdleTimeout { after, .. } => {
            check_limit(after).map_err(|m| (".after".to_owned(), m))
        }
        EvictionConfig::None => Ok(()),
    }
}

fn check_limit(d: HumanDuration) -> Result<(), String> {
    if d.0.is_zero() || d.0 > MAX_DURATION {
        return Err(out_of_range(d, false));
    }
    Ok(())
}

fn check_max_waiting(n: usize) -> Result<(), String> {
    if n > MAX_WAITING {
        return Err(format!("{n} is out of range (allowed: 0 to {MAX_WAITING})"));
    }
    Ok(())
}

fn out_of_range(d: HumanDuration, zero_ok: bool) -> String {
    let max = HumanDuration(MAX_DURATION);
    if zero_ok {
        format!("{d} is out of range (allowed: 0 to {max})")
    } else {
        format!("{d} is out of range (allowed: above 0 and at most {max})")
    }
}

/// Checks a pool or group name: 1 to 64 letters, digits, `-`, `_`, `.`.
///
/// # Errors
///
/// A message with what is allowed.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a name (allowed: 1 to 64 ASCII letters, digits, '-', '_' or '.')"
        ))
    }
}

fn check_env_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(format!(
            "{name:?} is not a variable name (allowed: a non-empty name without '=' or NUL)"
        ));
    }
    Ok(())
}

fn path_string(path: &serde_path_to_error::Path) -> String {
    let s = path.to_string();
    if s == "." { String::new() } else { s }
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}
