//! `[[pool]]`: a named pool of worker processes. Its own keys say how to
//! start a worker; kennel's [`Options`] are taken whole, at the same level.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kennel::Options;
use serde::{Deserialize, Serialize};

use super::Source;
use super::error::{Refusal, refusal};
use super::human::{HumanDuration, HumanSize, at_most_longest};
use super::policy::{EvictionConfig, SizingConfig};
use super::protocol::{InitializeConfig, ProtocolKind};
use super::server::MAX_BODY_LIMIT;

/// The first element of an argv that stands for the `kennel` binary itself
/// (e.g. `argv = ["@kennel", "worker", "demo"]` for the built-in demo worker).
pub(crate) const SELF_EXE: &str = "@kennel";

/// When workers start (`startup`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum StartupKind {
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

/// When a worker process counts as warm (`ready`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ReadyKind {
    /// `"line"`: it writes `{"ready":true}` (the default).
    #[default]
    Line,
    /// `"immediate"`: as soon as it started; it writes no ready line.
    Immediate,
}

/// One `[[pool]]`: a named pool of worker processes.
///
/// kennel's [`Options`] (`job_timeout`, `max_waiting`, `dispatch`, …) sit at
/// the same level as the pool's own keys, durations written `"30s"`.
/// [`Config::parse`](super::Config::parse) names the key of an unknown key
/// or a bad value; deserialising this type alone refuses an unknown key too,
/// without naming where.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub(crate) struct PoolConfig {
    /// `name`: letters, digits, `-`, `_`, `.`; unique.
    pub name: String,
    /// `argv`: the program and its arguments, never run through a shell.
    /// `"@kennel"` as the program stands for this `kennel` binary.
    pub argv: Vec<String>,
    /// `env`: variables added to the inherited environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `env_clear`: start workers with none of the server's environment
    /// but the variables of `env_keep` (default false: all of it, less the
    /// bearer token's variable, which a worker never inherits).
    #[serde(default)]
    pub env_clear: bool,
    /// `env_keep`: with `env_clear`, the server's variables a worker still
    /// inherits (default: `PATH`, `HOME`, `LANG`, `LC_ALL`, `TZ`, `TMPDIR`,
    /// `USER`).
    #[serde(default)]
    pub env_keep: Option<Vec<String>>,
    /// `worker_close_grace`: each step of a worker's close (stdin closed,
    /// then SIGTERM, then SIGKILL) waits this long (default 5 s).
    #[serde(default = "default_worker_close_grace")]
    pub worker_close_grace: HumanDuration,
    /// Variables the workers never inherit: the server's `token_env`, set
    /// when the config is read.
    #[serde(skip_deserializing, skip_serializing_if = "Vec::is_empty")]
    pub env_remove: Vec<String>,
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
    /// `ready` (default `"line"`).
    #[serde(default)]
    pub ready: ReadyKind,
    /// `max_reply`: the largest reply line a worker may write (default 16 MiB).
    #[serde(default)]
    pub max_reply: Option<HumanSize>,
    /// `protocol` (default `"json-lines"`).
    #[serde(default)]
    pub protocol: ProtocolKind,
    /// `cancel_lines`: json-lines workers that read `{"cancel":true}`
    /// (default false).
    #[serde(default)]
    pub cancel_lines: bool,
    /// `job_ids`: json-lines requests that are objects carry `"kennel_id"`,
    /// and a reply is taken only with its job's (default true).
    #[serde(default = "default_job_ids")]
    pub job_ids: bool,
    /// `method`: JSON-RPC, every job calls it with the body as params.
    #[serde(default)]
    pub method: Option<String>,
    /// `initialize`: JSON-RPC, the handshake that is the warm-up.
    #[serde(default)]
    pub initialize: Option<InitializeConfig>,
    /// `settings`: JSON-RPC, a table that answers the worker's
    /// `workspace/configuration` requests (a value per item's dotted section).
    #[serde(default)]
    pub settings: Option<serde_json::Value>,
    /// `answers`: JSON-RPC, a fixed result per method of the worker's own
    /// requests (`answers = { "roots/list" = { roots = [] } }`).
    #[serde(default)]
    pub answers: BTreeMap<String, serde_json::Value>,
    /// `load_method`: JSON-RPC, the method called to load a key onto a
    /// worker (`key_binding = "load"`); without it no load is sent.
    #[serde(default)]
    pub load_method: Option<String>,
    /// `unload_method`: JSON-RPC, the method called to unload a key.
    #[serde(default)]
    pub unload_method: Option<String>,
    /// `upload_limit`: the largest binary job body (octet-stream or
    /// multipart), before base64 (default: the server's `body_limit`).
    #[serde(default)]
    pub upload_limit: Option<HumanSize>,
    /// `probe_request`: the request a probe sends (with `probe_every` or
    /// `probe_on_lend`); the worker passes when it answers with a reply that
    /// is not an error. Without it a probe checks only that the process runs.
    #[serde(default)]
    pub probe_request: Option<serde_json::Value>,
    /// `threads`: each worker's CPU budget (default `"auto"`: the cores
    /// shared out among the running workers).
    #[serde(default)]
    pub threads: super::ThreadsConfig,
    /// `pin`: bind each worker to its share of the CPUs, as many as its
    /// thread budget (default false).
    #[serde(default)]
    pub pin: bool,
    /// `key`: a JSON pointer into the job's body whose string is the job's
    /// key (a `Kennel-Key` header wins over it).
    #[serde(default)]
    pub key: Option<String>,
    /// `key_pattern`: a regular expression every job's key must match in
    /// full; required when `{key}` is in the argv or an env value.
    #[serde(default)]
    pub key_pattern: Option<super::keyed::KeyPattern>,
    /// `mcp = { … }`: how `/mcp/{pool}` serves MCP sessions over a
    /// `json-rpc` pool (see [`crate::mcp`]).
    #[serde(default)]
    pub mcp: Option<crate::mcp::McpConfig>,
    /// `cancel_on_disconnect`: a job whose client hangs up while it runs is
    /// cancelled (cancel before kill), instead of left to finish (default
    /// false).
    #[serde(default)]
    pub cancel_on_disconnect: bool,
    /// `[pool.queue]`: the pool also takes its jobs from a JetStream work
    /// queue (see [`crate::queue`]).
    #[serde(default)]
    pub queue: Option<crate::queue::QueueConfig>,
    /// kennel's options, each at its own key (`job_timeout = "30s"`).
    #[serde(flatten)]
    pub options: Options,
}

impl PoolConfig {
    /// A pool entry with a name and an argv and every other key at its
    /// default (the defaults of its serde attributes).
    pub(crate) fn new<I, A>(name: impl Into<String>, argv: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<String>,
    {
        let argv: Vec<String> = argv.into_iter().map(Into::into).collect();
        serde_json::from_value(serde_json::json!({ "name": name.into(), "argv": argv }))
            .expect("a name and an argv are a pool entry, its other keys at their defaults")
    }

    /// Checks what serde cannot: names, the directory, ranges (kennel's own
    /// for its options) and the links between keys. Resolves `cwd` against
    /// `source.dir`.
    pub(crate) fn validate(&mut self, source: &Source) -> Result<(), Refusal> {
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
        if let Some(keep) = &self.env_keep {
            if !self.env_clear {
                return Err((
                    at("env_keep"),
                    "applies only with `env_clear = true` (without it every variable is inherited)"
                        .into(),
                ));
            }
            for (i, k) in keep.iter().enumerate() {
                check_env_name(k).map_err(|m| (format!("env_keep[{i}]"), m))?;
            }
        }
        at_most_longest(self.worker_close_grace).map_err(|m| (at("worker_close_grace"), m))?;
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
            s.check()?;
        }
        self.eviction.check()?;
        self.options.validate().map_err(refusal)?;
        if let (Some(n), Some(SizingConfig::Fixed { workers })) =
            (self.options.auto_grow_threshold, self.sizing)
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
        super::protocol::check(
            self.protocol,
            self.cancel_lines,
            self.method.as_deref(),
            self.initialize.as_ref(),
        )?;
        let answered = [
            ("settings", self.settings.is_some()),
            ("answers", !self.answers.is_empty()),
        ];
        if let Some((key, _)) = answered
            .iter()
            .find(|(_, set)| *set && self.protocol == ProtocolKind::JsonLines)
        {
            return Err((at(key), "is for the JSON-RPC protocols (allowed: with protocol = \"json-rpc\" or \"content-length\")".into()));
        }
        super::keyed::check(self)?;
        if let Some(mcp) = &self.mcp {
            if self.protocol != ProtocolKind::JsonRpc {
                return Err((
                    at("mcp"),
                    "is for protocol = \"json-rpc\" (allowed: an MCP server over stdio)".into(),
                ));
            }
            mcp.check()?;
        }
        if self.settings.as_ref().is_some_and(|s| !s.is_object()) {
            return Err((at("settings"), "is not a table (allowed: a table of sections, such as { python = { analysis = { ... } } })".into()));
        }
        for (key, size) in [
            ("upload_limit", self.upload_limit),
            ("max_reply", self.max_reply),
        ] {
            if let Some(m) = size
                && (m.0 == 0 || m.0 > MAX_BODY_LIMIT)
            {
                return Err((
                    at(key),
                    format!("{m} is out of range (allowed: 1 byte to 1 GiB)"),
                ));
            }
        }
        if let Some(q) = &mut self.queue {
            if let Some(f) = &q.creds_file {
                q.creds_file = Some(source.dir.join(f));
            }
            q.validate(&self.name)?;
        }
        Ok(())
    }

    /// How `/mcp/{pool}` serves this pool: its `mcp = { … }`, if it has
    /// one (only a `json-rpc` pool may).
    pub(crate) fn serves_mcp(&self) -> Option<crate::mcp::McpConfig> {
        self.mcp.clone()
    }

    /// The handshake its workers warm up with: `initialize`, or for a pool
    /// that serves MCP sessions MCP's; a pool that serves MCP declares the
    /// client capabilities it forwards (sampling, elicitation) unless
    /// `initialize` names its own.
    pub(crate) fn handshake(&self) -> Option<InitializeConfig> {
        let mut initialize = self.initialize.clone();
        if self.mcp.is_some() {
            let i = initialize.get_or_insert_with(InitializeConfig::default);
            if i.params.is_none() && i.capabilities.is_none() {
                i.capabilities = Some(serde_json::json!({"sampling": {}, "elicitation": {}}));
            }
        }
        initialize
    }

    /// The server's variables a worker inherits under `env_clear`.
    pub(crate) fn kept_env(&self) -> Vec<&str> {
        self.env_keep.as_ref().map_or_else(
            || DEFAULT_ENV_KEEP.to_vec(),
            |k| k.iter().map(String::as_str).collect(),
        )
    }
}

/// The variables a worker inherits under `env_clear` when `env_keep` is
/// not given.
pub(crate) const DEFAULT_ENV_KEEP: [&str; 7] =
    ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER"];

/// The grace of each step of a worker process's close when none is given
/// (stdin closed, then SIGTERM, then SIGKILL).
pub(crate) const DEFAULT_WORKER_CLOSE_GRACE: std::time::Duration =
    std::time::Duration::from_secs(5);

fn default_job_ids() -> bool {
    true
}

fn default_worker_close_grace() -> HumanDuration {
    HumanDuration(DEFAULT_WORKER_CLOSE_GRACE)
}

/// Checks a pool or group name: 1 to 64 letters, digits, `-`, `_`, `.`,
/// neither `.` nor `..` (which no URL path can name).
///
/// # Errors
///
/// A message with what is allowed.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a name (allowed: 1 to 64 ASCII letters, digits, '-', '_' or '.', other than \".\" and \"..\")"
        ))
    }
}

pub(crate) fn check_env_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(format!(
            "{name:?} is not a variable name (allowed: a non-empty name without '=' or NUL)"
        ));
    }
    Ok(())
}
