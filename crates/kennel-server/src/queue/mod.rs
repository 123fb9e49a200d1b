//! Pools fed by a NATS JetStream work queue (`[pool.queue]`): a durable
//! pull consumer every instance shares, asked for at most as many messages
//! as the pool has workers that can take a job now ([`credit`]); each job
//! has a record in JetStream ([`record`]) that a delivery claims before it
//! runs it ([`claim`]) and where its answer, the body the HTTP route gives,
//! is stored; the message is then acked, nak'd or terminated as
//! [`outcome`] says; `POST /pools/{name}/jobs` on such a pool records and
//! publishes the job ([`publish`]); a graceful stop drains. docs/SERVICE.md,
//! "Pools fed by a JetStream work queue", is the reference.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::consumer::PullConsumer;
use kennel::Pool;
use kennel_process::Coprocess;
use tokio::sync::Notify;
use tokio_util::task::{AbortOnDropHandle, TaskTracker};

use crate::job_key::KeyRules;
use crate::lock;
use crate::watch::Watch;

pub(crate) mod claim;
pub(crate) mod config;
pub(crate) mod credit;
pub(crate) mod dead;
pub(crate) mod metrics;
pub(crate) mod outcome;
pub(crate) mod record;

mod away;
mod connect;
mod job;
mod publish;
mod pull;

pub(crate) use self::config::QueueConfig;
pub(crate) use self::job::progress_subject;
pub(crate) use self::metrics::QueueMetrics;

/// The header that names where a job's answer goes (a client's inbox).
pub(crate) const REPLY_TO: &str = "Kennel-Reply-To";
/// The header of an answer that carries its HTTP status.
pub(crate) const STATUS: &str = "Kennel-Status";
/// The header of an answer that carries the job's id.
pub(crate) const JOB_ID: &str = "Kennel-Job-Id";
/// The header of an answer that names the delivery that ran it (1 for the
/// first).
pub(crate) const DELIVERY: &str = "Kennel-Delivery";
/// The header of an answer that names the instance that ran it.
pub(crate) const INSTANCE: &str = "Kennel-Instance";
/// The header of a job's key (checked again by the instance that runs it).
pub(crate) const KEY: &str = "Kennel-Key";
/// JetStream's own header for a publisher's message id (deduplicated within
/// the stream's duplicate window).
pub(crate) const MSG_ID: &str = "Nats-Msg-Id";
/// The key a job object gets when `job_meta` is on.
pub(crate) const META_KEY: &str = "_kennel";

/// Room left in a message for its headers, under the server's
/// `max_payload`.
pub(crate) const HEADROOM: usize = 512;

/// How long a JetStream request (a publish's confirmation, a record's read
/// or write) waits for its answer.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one pull request waits on the server for messages. A graceful
/// stop waits for the one outstanding to end (handing back what it brings).
pub(crate) const PULL_EXPIRES: Duration = Duration::from_secs(2);

/// The value of header `name` in `headers`, if there. (A name is looked up
/// as parsed, so that JetStream's own, such as `Nats-Msg-Id`, are found as
/// the client reads them.)
pub(crate) fn header(headers: Option<&async_nats::HeaderMap>, name: &str) -> Option<String> {
    let name: async_nats::header::HeaderName = name.parse().ok()?;
    headers?.get(name).map(|v| v.as_str().to_owned())
}

/// A failure to start a pool's queue: the key of the config it is about
/// and what went wrong.
#[derive(Debug)]
pub(crate) struct QueueStartError {
    /// The pool's name.
    pub pool: String,
    /// The key: `pool[0].queue.nats`, `pool[0].queue.stream`, …
    pub key: String,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for QueueStartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` ({:?}): {}", self.key, self.pool, self.message)
    }
}

impl std::error::Error for QueueStartError {}

/// Counts of one source, under one lock.
#[derive(Debug, Default)]
struct Counts {
    /// Messages received whose job has no worker yet.
    unplaced: usize,
    /// Messages asked for in pull requests still open, not yet received.
    asked: usize,
}

/// One pool's queue: its connection, consumer, counts and tasks.
#[derive(Debug)]
pub(crate) struct Source {
    name: String,
    pool: Pool<Coprocess>,
    config: QueueConfig,
    client: async_nats::Client,
    js: jetstream::Context,
    consumer: PullConsumer,
    /// The dead-letter stream ([`dead`]); `None` where it cannot be had
    /// (a queue that may not make streams, and no such stream).
    dead: Option<jetstream::stream::Stream>,
    /// The job records ([`record`]).
    jobs: jetstream::kv::Store,
    /// The jobs running here, and what cancels each ([`claim`]).
    running: Mutex<claim::Running>,
    /// The task that hears cancels told to every instance; stopped by the
    /// drain.
    cancels: Mutex<Option<AbortOnDropHandle<()>>>,
    watch: Option<Watch>,
    body_limit: usize,
    instance: Arc<str>,
    metrics: QueueMetrics,
    counts: Mutex<Counts>,
    /// Woken when credits may have grown: a job got a worker or ended, a
    /// pull ended, the drain began.
    wake: Notify,
    draining: AtomicBool,
    /// The fetching task, the pull requests and the jobs.
    tasks: TaskTracker,
    /// A moving average of the seconds a job took, for the projected wait.
    mean_job: Mutex<Option<f64>>,
    /// How its jobs' keys are read: the pool's `key` and `key_pattern`.
    keys: Mutex<KeyRules>,
}

/// The name this instance gives itself in answers (`Kennel-Instance`): the
/// host's name (a pod's name in Kubernetes) and the process id.
fn instance_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}/{}", std::process::id())
}

impl Source {
    /// Its NATS connection.
    pub(crate) fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// Whether its connection is down.
    pub(crate) fn is_disconnected(&self) -> bool {
        self.client.connection_state() != async_nats::connection::State::Connected
    }

    fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Stops fetching, lets every job started end and be acked (a message
    /// that arrives meanwhile is handed back at once), and flushes the acks.
    pub(crate) async fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        drop(lock(&self.cancels).take());
        self.tasks.close();
        self.tasks.wait().await;
        if tokio::time::timeout(Duration::from_secs(2), self.client.flush())
            .await
            .is_err()
        {
            tracing::warn!(target: "kennel_server", pool = %self.name, "the last acks could not be flushed within 2s");
        }
    }

    /// Reads its jobs' keys by `keys` from now on (a reload changed the
    /// pool's `key` or `key_pattern` in place).
    pub(crate) fn set_key_rules(&self, keys: KeyRules) {
        *lock(&self.keys) = keys;
    }

    /// Records a job's time in the moving average (weight 1/8) and sets the
    /// projected-wait gauge.
    fn timed(&self, seconds: f64) {
        let mut mean = lock(&self.mean_job);
        *mean = Some(mean.map_or(seconds, |m| m + (seconds - m) / 8.0));
    }

    /// Sets the pending and projected-wait gauges from the consumer's
    /// pending count.
    fn pending(&self, pending: u64) {
        #[expect(clippy::cast_precision_loss, reason = "a gauge")]
        let pending = pending as f64;
        self.metrics.pending.set(pending);
        let mean = *lock(&self.mean_job);
        #[expect(clippy::cast_precision_loss, reason = "a gauge")]
        let size = self.pool.stats().size.max(1) as f64;
        self.metrics
            .projected_wait
            .set((pending + 1.0) * mean.unwrap_or(0.0) / size);
    }

    /// Connects the queue of pool `name` (`config`) for `pool`: creates the
    /// stream if asked to and missing, creates or updates the durable
    /// consumer, opens the job records' bucket (kept `result_ttl` after
    /// their last change), and starts fetching.
    ///
    /// # Errors
    ///
    /// The key under `queue` (`".nats"`, …) and what went wrong.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: once connected, the queue fetches until drained.
    pub(crate) async fn start(
        name: &str,
        config: &QueueConfig,
        pool: Pool<Coprocess>,
        watch: Option<Watch>,
        body_limit: usize,
        keys: KeyRules,
        result_ttl: Duration,
    ) -> Result<Arc<Self>, (String, String)> {
        let instance: Arc<str> = instance_name().into();
        let (client, js, consumer) = connect::connect(name, config, &instance)
            .await
            .map_err(|(key, message)| (format!(".{key}"), message))?;
        let dead = match dead::stream(&js, config.create).await {
            Ok(stream) => Some(stream),
            Err(e) => {
                tracing::warn!(target: "kennel_server", pool = %name, stream = dead::DEAD_STREAM, error = %e, "no dead-letter stream: jobs given up on are answered and logged, not kept");
                None
            }
        };
        let jobs = record::bucket(&js, config.create, result_ttl)
            .await
            .map_err(|e| (".stream".to_owned(), e))?;
        let source = Arc::new(Self {
            name: name.to_owned(),
            pool,
            config: config.clone(),
            client,
            js,
            consumer,
            dead,
            jobs,
            running: Mutex::default(),
            cancels: Mutex::default(),
            watch,
            body_limit,
            instance,
            metrics: QueueMetrics::new(name),
            counts: Mutex::default(),
            wake: Notify::new(),
            draining: AtomicBool::new(false),
            tasks: TaskTracker::new(),
            mean_job: Mutex::default(),
            keys: Mutex::new(keys),
        });
        let listening = tokio::spawn(claim::listen(
            Arc::downgrade(&source),
            source.client.clone(),
        ));
        *lock(&source.cancels) = Some(AbortOnDropHandle::new(listening));
        let fetching = source.clone();
        source.tasks.spawn(pull::fetch(fetching));
        Ok(source)
    }
}
