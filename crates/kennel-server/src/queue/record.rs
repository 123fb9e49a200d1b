//! Job records of queued pools: each job's state and, once it is over, its
//! answer, in the JetStream key-value bucket [`JOBS_BUCKET`] (one entry per
//! job id, kept `result_ttl` after its last change). Any instance answers
//! `GET /jobs/{id}` from it; the synchronous route waits on the stored
//! answer, so a reconnect or a restart of NATS does not lose it; a
//! redelivered job whose answer is stored is not run again; a delivery
//! claims its job by compare-and-set, so two never run it at once.

use std::time::{Duration, SystemTime};

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::Source;
use super::away::Away;
use crate::async_jobs::{JobState, JobView};

/// The bucket of every queued pool's job records on a NATS server.
pub(crate) const JOBS_BUCKET: &str = "KENNEL_JOBS";

/// How long a record that cannot be read or written (NATS is away) is
/// tried again.
pub(super) const STORE_FOR: Duration = Duration::from_secs(300);

/// How often a waiter on a quiet watch reads the record itself (a watch may
/// go quiet across a reconnect).
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The bucket: found, or made when the queue may make streams (`create`),
/// its records kept `ttl` after their last change.
///
/// # Errors
///
/// What JetStream said.
///
/// # Cancel safety
///
/// Not cancel safe: dropped midway, the bucket may or may not be made.
pub(super) async fn bucket(
    js: &jetstream::Context,
    create: bool,
    ttl: Duration,
) -> Result<kv::Store, String> {
    let found = js.get_key_value(JOBS_BUCKET).await;
    if found.is_ok() || !create {
        return found.map_err(|e| {
            format!("cannot find the key-value bucket {JOBS_BUCKET:?} (with `create = false` it must exist): {e}")
        });
    }
    // The bucket's stream, made as the client's `create_key_value` makes
    // it (that call first asks for the account's limits, in a form older
    // servers do not answer).
    let made = js
        .create_stream(jetstream::stream::Config {
            name: format!("KV_{JOBS_BUCKET}"),
            description: Some("kennel's queued jobs: state and answer, by job id".into()),
            subjects: vec![format!("$KV.{JOBS_BUCKET}.>")],
            max_messages_per_subject: 1,
            max_age: ttl,
            storage: jetstream::stream::StorageType::File,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: jetstream::stream::DiscardPolicy::New,
            ..Default::default()
        })
        .await;
    // Made by another instance meanwhile (perhaps with another ttl), or
    // now.
    js.get_key_value(JOBS_BUCKET).await.map_err(|e| match made {
        Err(made) => made.to_string(),
        Ok(_) => e.to_string(),
    })
}

/// One job as the bucket keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    /// Its pool.
    pub pool: String,
    /// Where it stands.
    #[serde(with = "state")]
    pub state: JobState,
    /// Deliveries that took it.
    pub attempts: u64,
    /// The instance that last took it.
    #[serde(default)]
    pub instance: Option<String>,
    /// When it was accepted, first taken, and ended (RFC 3339, UTC).
    pub created: String,
    #[serde(default)]
    pub started: Option<String>,
    #[serde(default)]
    pub finished: Option<String>,
    /// Once over: the HTTP status of its answer, its `Retry-After`, and the
    /// body as the job route answers it (the reply, or the error).
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub retry_after: Option<String>,
    #[serde(default)]
    pub answer: Option<Box<RawValue>>,
    /// How many times its runner said it still runs.
    #[serde(default)]
    pub beat: u64,
}

mod state {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::async_jobs::JobState;

    pub(super) fn serialize<S: Serializer>(s: &JobState, out: S) -> Result<S::Ok, S::Error> {
        out.serialize_str(s.as_str())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<JobState, D::Error> {
        Ok(JobState::parse(&String::deserialize(d)?))
    }
}

/// Whether `id` can be a key of the bucket (and a subject's last tokens)
/// as it is: 1 to 128 of `A-Z a-z 0-9 - _ = /` and single inner dots.
fn is_key(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && !id.starts_with('.')
        && !id.ends_with('.')
        && !id.contains("..")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_=/.".contains(&b))
}

/// 32 hex digits of the SHA-256 of `bytes`.
pub(crate) fn digest(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bucket key of job `id`: the id itself where a key may be it, else
/// `sha-` and a digest of it (a publisher's `Nats-Msg-Id` may hold any
/// character, and `<stream>:<sequence>` holds a colon).
pub(crate) fn key(id: &str) -> String {
    if is_key(id) {
        id.to_owned()
    } else {
        format!("sha-{}", digest(id.as_bytes()))
    }
}

/// Now, as records write it.
pub(crate) fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

impl Record {
    /// A job just accepted on `pool`.
    pub(crate) fn queued(pool: &str) -> Self {
        Self {
            pool: pool.to_owned(),
            state: JobState::Queued,
            attempts: 0,
            instance: None,
            created: now(),
            started: None,
            finished: None,
            status: None,
            retry_after: None,
            answer: None,
            beat: 0,
        }
    }

    /// Taken by delivery `attempt` on `instance`.
    pub(crate) fn taken(mut self, attempt: u64, instance: &str) -> Self {
        self.state = JobState::Running;
        self.attempts = attempt;
        self.instance = Some(instance.to_owned());
        self.started.get_or_insert_with(now);
        self
    }

    /// Over, answered `status` with `body`: done for a 2xx, else failed
    /// (`cancelled` says so).
    pub(crate) fn ended(
        mut self,
        state: Option<JobState>,
        status: u16,
        retry_after: Option<String>,
        body: &[u8],
    ) -> Self {
        self.state = state.unwrap_or(if (200..300).contains(&status) {
            JobState::Done
        } else {
            JobState::Failed
        });
        self.status = Some(status);
        self.retry_after = retry_after;
        self.answer = std::str::from_utf8(body)
            .ok()
            .and_then(|b| RawValue::from_string(b.to_owned()).ok());
        self.finished = Some(now());
        self
    }

    /// The error kind of its answer (`interrupted`, `cancelled`, …), if it
    /// failed.
    pub(crate) fn error_kind(&self) -> Option<String> {
        let answer: serde_json::Value = serde_json::from_str(self.answer.as_ref()?.get()).ok()?;
        Some(answer.get("error")?.as_str()?.to_owned())
    }

    pub(crate) fn to_bytes(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }

    fn of(entry: &kv::Entry) -> Option<Self> {
        (entry.operation == kv::Operation::Put)
            .then(|| serde_json::from_slice(&entry.value).ok())
            .flatten()
    }

    /// The job as `GET /jobs/{id}` shows it.
    pub(crate) fn view(self, id: &str) -> JobView {
        let (result, error) = match self.state {
            JobState::Done => (self.answer, None),
            _ => (
                None,
                self.answer.and_then(|a| serde_json::from_str(a.get()).ok()),
            ),
        };
        JobView {
            id: id.to_owned(),
            pool: self.pool,
            state: self.state.as_str().to_owned(),
            attempts: u32::try_from(self.attempts).unwrap_or(u32::MAX),
            created: self.created,
            started: self.started,
            finished: self.finished,
            result,
            error,
        }
    }
}

impl Source {
    /// The record of job `id` and its revision, if there is one.
    ///
    /// # Errors
    ///
    /// What JetStream said.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub(crate) async fn record(&self, id: &str) -> Result<Option<(Record, u64)>, String> {
        let entry = self.jobs.entry(key(id)).await.map_err(|e| e.to_string())?;
        Ok(entry.and_then(|e| Record::of(&e).map(|r| (r, e.revision))))
    }

    /// Records job `id` as queued; `false` if it had a record already.
    ///
    /// # Errors
    ///
    /// What JetStream said.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped midway, the record may or may not be made.
    pub(super) async fn record_queued(&self, id: &str) -> Result<bool, String> {
        match self
            .jobs
            .create(key(id), Record::queued(&self.name).to_bytes())
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Writes `record` over revision `revision` of job `id`.
    ///
    /// # Errors
    ///
    /// What JetStream said (a wrong revision: someone wrote it meanwhile).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped midway, the record may or may not be
    /// written.
    pub(super) async fn replace(
        &self,
        id: &str,
        record: &Record,
        revision: u64,
    ) -> Result<u64, kv::UpdateError> {
        self.jobs.update(key(id), record.to_bytes(), revision).await
    }

    /// Stores `record`, job `id`'s end or (queued again) its state, over
    /// `revision` (what its runner last wrote), trying again while NATS is
    /// away (up to five minutes). A record someone else ended meanwhile
    /// stays as it is (cancelled, or answered by another delivery), unless
    /// it says `interrupted` and `record` is an end: the job did run, and
    /// this is its answer.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped midway, the record may or may not be
    /// stored.
    pub(super) async fn store(&self, id: &str, record: &Record, mut revision: u64) {
        let mut away = Away::for_(STORE_FOR);
        loop {
            match self.replace(id, record, revision).await {
                Ok(_) => return,
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                    match self.record(id).await {
                        Ok(Some((now, rev))) => {
                            let taken_over = now.state.is_final()
                                && (!record.state.is_final()
                                    || now.error_kind().as_deref() != Some("interrupted"));
                            if taken_over {
                                return;
                            }
                            revision = rev;
                            continue;
                        }
                        // Expired or never made: made now.
                        Ok(None) => revision = 0,
                        Err(_) => {}
                    }
                }
                Err(_) => {}
            }
            if away.wait(()).await.is_err() {
                tracing::warn!(target: "kennel_server", pool = %self.name, id, "cannot store a job's record: NATS has been away for five minutes");
                return;
            }
        }
    }

    /// Waits until job `id` is over, and gives its record: through a watch
    /// of its key, made again after an error, and a read of the record each
    /// second the watch is quiet.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub(crate) async fn wait_end(&self, id: &str) -> Record {
        let over = |record: Option<Record>| record.filter(|r| r.state.is_final());
        loop {
            let watch = self.jobs.watch(key(id)).await;
            // Read after the watch began: no end is missed between the two.
            if let Ok(Some((record, _))) = self.record(id).await
                && let Some(r) = over(Some(record))
            {
                return r;
            }
            let Ok(mut watch) = watch else {
                tokio::time::sleep(LOOK_EVERY).await;
                continue;
            };
            loop {
                match tokio::time::timeout(LOOK_EVERY, watch.next()).await {
                    Ok(Some(Ok(entry))) => {
                        if let Some(r) = over(Record::of(&entry)) {
                            return r;
                        }
                    }
                    Ok(Some(Err(_)) | None) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        break;
                    }
                    Err(_quiet) => {
                        if let Ok(Some((record, _))) = self.record(id).await
                            && let Some(r) = over(Some(record))
                        {
                            return r;
                        }
                    }
                }
            }
        }
    }
}
