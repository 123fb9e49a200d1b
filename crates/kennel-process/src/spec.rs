//! [`CoprocessSpec`]: how to start a coprocess.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use crate::answers::Answers;
use crate::coprocess::Coprocess;
use crate::error::ProcessError;
use crate::framing::{Framing, Handshake};

/// The default limit on one line of a worker's stdout: 16 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The default grace of each step of [`Coprocess::close`]: 5 seconds.
pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(5);

/// When a coprocess counts as warm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReadyMode {
    /// Wait for the worker to write the line `{"ready":true}` (the default).
    #[default]
    Line,
    /// The worker is ready as soon as it has started, and writes no ready
    /// line. For programs that need no warm-up.
    Immediate,
}

/// How to start a [`Coprocess`]: the argv, its environment and the limits of
/// the protocol.
///
/// The spec is cheap to clone, so a pool's factory can hold one and start a
/// worker per slot:
///
/// ```no_run
/// use std::time::Duration;
/// use kennel_process::{CoprocessSpec, ReadyMode};
///
/// # async fn demo() -> Result<(), kennel_process::ProcessError> {
/// let spec = CoprocessSpec::new(["python3", "examples/workers/echo.py"])
///     .env("PYTHONUNBUFFERED", "1")
///     .ready(ReadyMode::Line)
///     .max_line_bytes(1024 * 1024)
///     .close_grace(Duration::from_secs(2));
///
/// let mut worker = spec.clone().label("echo", 0).spawn()?;
/// worker.ready().await?;
/// let reply = worker.request(&serde_json::json!({"say": "hi"})).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a spec does nothing until `spawn` is called"]
pub struct CoprocessSpec {
    pub(crate) argv: Vec<OsString>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) env_clear: bool,
    pub(crate) env_remove: Vec<OsString>,
    pub(crate) current_dir: Option<PathBuf>,
    pub(crate) ready: ReadyMode,
    pub(crate) max_line_bytes: usize,
    pub(crate) close_grace: Duration,
    pub(crate) pool: Option<String>,
    pub(crate) slot: Option<usize>,
    pub(crate) framing: Framing,
    pub(crate) cancel_lines: bool,
    pub(crate) job_ids: bool,
    pub(crate) method: Option<Arc<str>>,
    /// JSON-RPC: the method of a load ([`Coprocess::load`]).
    pub(crate) load_method: Option<Arc<str>>,
    /// JSON-RPC: the method of an unload ([`Coprocess::unload`]).
    pub(crate) unload_method: Option<Arc<str>>,
    pub(crate) handshake: Option<Arc<Handshake>>,
    /// JSON-RPC: what the worker's own requests are answered.
    pub(crate) answers: Arc<Answers>,
    /// The request a probe sends ([`Worker::check`](kennel::Worker::check)).
    pub(crate) probe: Option<std::sync::Arc<serde_json::Value>>,
    /// The threads each worker of a pool may use.
    pub(crate) threads: Option<crate::ThreadBudget>,
    /// Whether each worker of a pool is bound to its share of the CPUs.
    pub(crate) pin: bool,
    /// The CPUs this worker is bound to ([`for_slot`](Self::for_slot) sets
    /// them for a pinned pool's slot).
    pub(crate) cpus: Option<Arc<[usize]>>,
}

impl CoprocessSpec {
    /// A spec that runs `argv`: the program first, then its arguments. The
    /// program is found on `PATH` as [`std::process::Command`] does; no shell
    /// is involved, so nothing in the argv is ever interpreted.
    pub fn new<I, A>(argv: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<OsString>,
    {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            env_clear: false,
            env_remove: Vec::new(),
            current_dir: None,
            ready: ReadyMode::default(),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            close_grace: DEFAULT_CLOSE_GRACE,
            pool: None,
            slot: None,
            framing: Framing::default(),
            cancel_lines: false,
            job_ids: true,
            method: None,
            load_method: None,
            unload_method: None,
            handshake: None,
            answers: Arc::default(),
            probe: None,
            threads: None,
            pin: false,
            cpus: None,
        }
    }

    /// How messages are framed (default [`Framing::JsonLines`]). In the
    /// JSON-RPC framings the worker is warm once the
    /// [`handshake`](Self::handshake) is answered, or at once without one
    /// (the [`ready`](Self::ready) mode is for JSON lines).
    pub fn framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    /// JSON lines: the worker reads `{"cancel":true}` lines while it works
    /// (the SDKs do), so an aborted or timed-out job is cancelled with one
    /// instead of a kill (see [`Coprocess::cancel`]). Off by default: a
    /// worker that does not read them would take one for a request.
    pub fn cancel_lines(mut self, on: bool) -> Self {
        self.cancel_lines = on;
        self
    }

    /// JSON lines: kennel adds its id to each request that is a JSON object,
    /// as its first key `"kennel_id"` (the worker's job number, from 1), and
    /// takes a line that carries `"kennel_id"` only for the job with that
    /// id, the key taken out of the reply it hands on. The SDKs echo it. On
    /// by default; turn it off only for a worker that refuses unknown keys,
    /// whose replies then match their jobs by order alone
    /// (`docs/PROTOCOL.md`, rule 3).
    pub fn job_ids(mut self, on: bool) -> Self {
        self.job_ids = on;
        self
    }

    /// JSON-RPC: every job is a call of `method` (such as MCP's
    /// `tools/call`) whose params are the job. Without it a job is
    /// `{"method": …, "params": …}`.
    pub fn method(mut self, method: impl Into<String>) -> Self {
        self.method = Some(Arc::from(method.into()));
        self
    }

    /// JSON-RPC: a [load](Coprocess::load) of a key is a call of `method`
    /// with params `{"key": "…"}` (the SDKs serve `kennel/load`). Without
    /// it a load sends nothing and succeeds: the key only routes jobs (a
    /// language server per workspace). JSON lines need no method: a load is
    /// the line `{"kennel_load": "…"}`.
    pub fn load_method(mut self, method: impl Into<String>) -> Self {
        self.load_method = Some(Arc::from(method.into()));
        self
    }

    /// JSON-RPC: an [unload](Coprocess::unload) of a key is a call of
    /// `method` with params `{"key": "…"}` (the SDKs serve
    /// `kennel/unload`). Without it an unload sends nothing and succeeds.
    pub fn unload_method(mut self, method: impl Into<String>) -> Self {
        self.unload_method = Some(Arc::from(method.into()));
        self
    }

    /// JSON-RPC: the warm-up is this `initialize` handshake (for MCP,
    /// [`Handshake::mcp`]).
    pub fn handshake(mut self, handshake: Handshake) -> Self {
        self.handshake = Some(Arc::new(handshake));
        self
    }

    /// JSON-RPC: the worker's request `method` (a server → client request)
    /// is answered with `result`, over kennel's own answers: `ping` gets
    /// `{}`, `workspace/configuration` the [`settings`](Self::settings), in
    /// the `content-length` framing the requests of
    /// [`LSP_NULL_REQUESTS`](crate::LSP_NULL_REQUESTS) `null`, and any
    /// other -32601 (method not found).
    pub fn answer(mut self, method: impl Into<String>, result: serde_json::Value) -> Self {
        Arc::make_mut(&mut self.answers).fix(method.into(), result);
        self
    }

    /// JSON-RPC: the settings `workspace/configuration` requests read: for
    /// each of its `params.items`, the value at the item's `section`, a
    /// dotted path (`python.analysis` is `settings["python"]["analysis"]`),
    /// `null` where there is none; the whole `settings` for an item without
    /// a section.
    pub fn settings(mut self, settings: serde_json::Value) -> Self {
        Arc::make_mut(&mut self.answers).set_settings(settings);
        self
    }

    /// Sets an environment variable for the worker (on top of the inherited
    /// environment, unless [`env_clear`](Self::env_clear) is used).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Starts the worker with an empty environment, plus the variables given
    /// with [`env`](Self::env).
    pub fn env_clear(mut self) -> Self {
        self.env_clear = true;
        self
    }

    /// Removes a variable from the environment the worker inherits (a
    /// secret of the parent's, such as the service's bearer token). A
    /// variable set with [`env`](Self::env) is set all the same.
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.env_remove.push(key.into());
        self
    }

    /// Sets the worker's working directory.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Chooses when the worker counts as warm (default: [`ReadyMode::Line`]).
    pub fn ready(mut self, mode: ReadyMode) -> Self {
        self.ready = mode;
        self
    }

    /// The longest line the worker may write on stdout, in bytes, not
    /// counting the newline (default 16 MiB). A longer line fails the request
    /// with [`ProcessError::Protocol`] and kills the worker. At least 1.
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes.max(1);
        self
    }

    /// How long [`Coprocess::close`] waits after closing stdin, and again
    /// after SIGTERM, before the next step (default 5 s).
    pub fn close_grace(mut self, grace: Duration) -> Self {
        self.close_grace = grace;
        self
    }

    /// Names the pool and slot the worker serves. They are added as fields
    /// `pool` and `slot` to every `tracing` event about the worker, including
    /// each line it writes on stderr.
    pub fn label(mut self, pool: impl Into<String>, slot: usize) -> Self {
        self.pool = Some(pool.into());
        self.slot = Some(slot);
        self
    }

    /// The request the probe of a pool with `probe_every` or `probe_on_lend`
    /// sends: the worker passes with a reply that is not an error. Without
    /// one, the probe checks only that the process still runs.
    pub fn probe(mut self, request: serde_json::Value) -> Self {
        self.probe = Some(std::sync::Arc::new(request));
        self
    }

    /// Gives each worker of a pool built from this spec a
    /// [`ThreadBudget`](crate::ThreadBudget): each of
    /// [`THREAD_VARIABLES`](crate::THREAD_VARIABLES) the spec does not set
    /// is set to its share ([`for_slot`](Self::for_slot)).
    pub fn threads(mut self, budget: crate::ThreadBudget) -> Self {
        self.threads = Some(budget);
        self
    }

    /// Binds each worker of a pool built from this spec to its share of the
    /// CPUs this process may use (off by default): as many as its
    /// [`threads`](Self::threads) budget (without one, `cores / size`),
    /// slot by slot (with 4 CPUs and 2 workers, slot 0 gets CPUs 0-1, slot
    /// 1 CPUs 2-3); not when the share is every CPU. The mask is set before
    /// the program runs, so its threads and children inherit it, and the
    /// worker finds its CPUs in `KENNEL_CPUS` (`0-1`). Linux only.
    pub fn pin(mut self, on: bool) -> Self {
        self.pin = on;
        self
    }

    /// The argv the worker is started with.
    pub fn argv(&self) -> &[OsString] {
        &self.argv
    }

    /// Starts the worker: its own process group, stdin and stdout piped for
    /// the protocol, stderr forwarded line by line to `tracing`. Await
    /// [`Coprocess::ready`] for its warm-up (a pool does).
    ///
    /// # Errors
    ///
    /// [`ProcessError::Spawn`] if the argv is empty or the program cannot be
    /// started (not found, not executable, …).
    ///
    /// # Panics
    ///
    /// Panics if called outside a Tokio runtime with IO and time enabled: the
    /// coprocess spawns a task that waits for the child and one that reads
    /// its stderr.
    pub fn spawn(&self) -> Result<Coprocess, ProcessError> {
        Coprocess::spawn(self)
    }
}
