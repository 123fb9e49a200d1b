//! A delivery's claim on its job, through the job's record
//! ([`super::record`]): a job that is over (answered, cancelled) is not run
//! again; one that another delivery runs is waited on while its runner says
//! it still runs; one whose runner went silent for `ack_wait` and a
//! request's timeout (stopped, or cut off) is taken over where the pool
//! says its jobs may run twice (`retry_on_crash`), else failed
//! `interrupted`. A running job says it
//! still runs with each in-progress ack; `DELETE /jobs/{id}` cancels it
//! on whichever instance runs it, through the subject [`CANCEL_SUBJECT`].

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use async_nats::jetstream::kv::{CreateErrorKind, UpdateErrorKind};
use async_nats::jetstream::{self, AckKind};
use futures_util::StreamExt;
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Source;
use super::away::Away;
use super::record::Record;
use crate::async_jobs::JobState;
use crate::lock;

/// The subject on which a cancel is told to every instance (its payload:
/// the job's id).
pub(crate) const CANCEL_SUBJECT: &str = "kennel.cancel";

/// The HTTP status of a cancelled job's answer.
pub(crate) const CANCELLED_STATUS: u16 = 409;

/// The HTTP status of an interrupted job's answer.
const INTERRUPTED_STATUS: u16 = 502;

/// What a delivery may do with its job.
pub(super) enum Claim {
    /// Run it: its record says this delivery has it, at this revision.
    Run(Record, u64),
    /// Do not: it is over (answered, cancelled, or failed `interrupted`
    /// just now); its record.
    Over(Record),
}

/// The jobs running on one source, by id, and what cancels each.
pub(super) type Running = HashMap<String, CancellationToken>;

impl Source {
    /// Claims job `id` for its `delivered`-th delivery (in-progress acks
    /// keep `message` while it waits on another delivery).
    ///
    /// # Errors
    ///
    /// What JetStream last said, when the record could not be read or
    /// written for five minutes (the message should be delivered again
    /// later).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped midway, the record may say this delivery
    /// runs it.
    pub(super) async fn claim(
        &self,
        id: &str,
        delivered: u64,
        message: &jetstream::Message,
    ) -> Result<Claim, String> {
        // A running record's revision, and since when it has not changed.
        let mut silent: Option<(u64, Instant)> = None;
        let mut away = Away::for_(super::record::STORE_FOR);
        loop {
            let (record, revision) = match self.record(id).await {
                Ok(Some(found)) => found,
                Ok(None) => {
                    // Published straight to the stream, or its record
                    // expired.
                    let taken = Record::queued(&self.name).taken(delivered, &self.instance);
                    match self
                        .jobs
                        .create(super::record::key(id), taken.to_bytes())
                        .await
                    {
                        Ok(rev) => return Ok(Claim::Run(taken, rev)),
                        Err(e) if e.kind() == CreateErrorKind::AlreadyExists => continue,
                        Err(e) => {
                            away.wait(e.to_string()).await?;
                            continue;
                        }
                    }
                }
                Err(e) => {
                    away.wait(e).await?;
                    continue;
                }
            };
            if record.state.is_final() {
                return Ok(Claim::Over(record));
            }
            let mine = record.state == JobState::Running
                && record.attempts == delivered
                && record.instance.as_deref() == Some(&*self.instance);
            if mine {
                // This delivery's own claim, written while its answer was
                // lost (NATS went away).
                return Ok(Claim::Run(record, revision));
            }
            let mut next = record.clone().taken(delivered, &self.instance);
            // A delivery before the last one that the record does not
            // show may have claimed the job, its claim lost with the NATS
            // server's last writes: waited on as a running one, then
            // taken.
            let unseen = record.state == JobState::Queued && delivered > record.attempts + 1;
            if record.state == JobState::Running || unseen {
                let since = match silent {
                    Some((rev, since)) if rev == revision => since,
                    _ => silent.insert((revision, Instant::now())).1,
                };
                // Its runner beats every third of ack_wait; one cut off
                // from NATS beats again within a request's timeout of its
                // return.
                if since.elapsed() < self.config.ack_wait.0 + super::REQUEST_TIMEOUT {
                    let _ = message.ack_with(AckKind::Progress).await;
                    tokio::time::sleep(self.config.progress_every()).await;
                    continue;
                }
                if record.state == JobState::Running && self.pool.options().retry_on_crash == 0 {
                    let error = json!({
                        "error": "interrupted",
                        "message": "the instance that ran the job went silent for ack_wait (stopped, or cut off), and its pool does not say its jobs may run twice (retry_on_crash)",
                    });
                    next =
                        record.ended(None, INTERRUPTED_STATUS, None, error.to_string().as_bytes());
                }
            }
            match self.replace(id, &next, revision).await {
                Ok(_) if next.state.is_final() => return Ok(Claim::Over(next)),
                Ok(rev) => return Ok(Claim::Run(next, rev)),
                Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => {}
                Err(e) => away.wait(e.to_string()).await?,
            }
        }
    }

    /// Notes in job `id`'s record, if it is queued, that delivery
    /// `delivered` passed it by unrun (handed back by a drain). One try: a
    /// record not noted makes the next delivery wait as for a lost claim.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub(super) async fn passed(&self, id: &str, delivered: u64) {
        if let Ok(Some((mut record, revision))) = self.record(id).await
            && record.state == JobState::Queued
            && record.attempts < delivered
        {
            record.attempts = delivered;
            let _ = self.replace(id, &record, revision).await;
        }
    }

    /// Says that job `id` still runs: its record's `beat` goes up over
    /// `revision`, which becomes the new one. A cancelled record cancels
    /// the job here; one that lost this delivery's claim (the NATS server
    /// lost its last writes) is claimed again; one another delivery took
    /// over is left as it is.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: at worst the beat is not written.
    pub(super) async fn beat(&self, id: &str, record: &mut Record, revision: &mut u64) {
        record.beat += 1;
        match self.replace(id, record, *revision).await {
            Ok(rev) => *revision = rev,
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => {
                let Ok(Some((now, rev))) = self.record(id).await else {
                    return;
                };
                let mine = now.attempts == record.attempts
                    && now.instance == record.instance
                    && now.state == JobState::Running;
                if now.state == JobState::Cancelled {
                    self.cancel_here(id);
                } else if now.state == JobState::Queued || mine {
                    if let Ok(rev) = self.replace(id, record, rev).await {
                        *revision = rev;
                    }
                }
            }
            Err(_) => {}
        }
    }

    /// Cancels job `id` wherever it runs: its record says `cancelled` (a
    /// queued job then never runs), and the instance running it drops it
    /// (cancel before kill). A job already over stays as it is. `None`
    /// when there is no such job.
    ///
    /// # Errors
    ///
    /// What JetStream said.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped midway, the job may or may not be
    /// cancelled.
    pub(crate) async fn cancel(&self, id: &str) -> Result<Option<Record>, String> {
        loop {
            let Some((record, revision)) = self.record(id).await? else {
                return Ok(None);
            };
            if record.state.is_final() {
                return Ok(Some(record));
            }
            let error = json!({"error": "cancelled", "message": "cancelled by DELETE /jobs/{id}"});
            let ended = record.ended(
                Some(JobState::Cancelled),
                CANCELLED_STATUS,
                None,
                error.to_string().as_bytes(),
            );
            match self.replace(id, &ended, revision).await {
                Ok(_) => {
                    let told = self
                        .client
                        .publish(CANCEL_SUBJECT, id.to_owned().into())
                        .await;
                    if let Err(e) = told {
                        tracing::warn!(target: "kennel_server", pool = %self.name, id, error = %e, "cannot tell the instances of a cancel; a running job ends at its next beat");
                    }
                    return Ok(Some(ended));
                }
                Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Cancels job `id` if it runs on this source.
    fn cancel_here(&self, id: &str) {
        if let Some(token) = lock(&self.running).get(id) {
            token.cancel();
        }
    }

    /// A token that cancels job `id` while it runs here; forgotten when the
    /// guard drops.
    pub(super) fn running(self: &Arc<Self>, id: &str) -> RunningGuard {
        let token = CancellationToken::new();
        lock(&self.running).insert(id.to_owned(), token.clone());
        RunningGuard {
            source: self.clone(),
            id: id.to_owned(),
            token,
        }
    }
}

/// A job running on a source: its cancel token, taken off the source's
/// list on drop.
pub(super) struct RunningGuard {
    source: Arc<Source>,
    id: String,
    pub(super) token: CancellationToken,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        lock(&self.source.running).remove(&self.id);
    }
}

/// Listens for cancels told on [`CANCEL_SUBJECT`] and cancels those of
/// `source`'s jobs that run here; ends with the source or the connection.
///
/// # Cancel safety
///
/// Cancel safe.
pub(super) async fn listen(source: Weak<Source>, client: async_nats::Client) {
    let Ok(mut cancels) = client.subscribe(CANCEL_SUBJECT).await else {
        tracing::warn!(target: "kennel_server", "cannot listen for cancels; running jobs see theirs at their next beat");
        return;
    };
    while let Some(message) = cancels.next().await {
        let Some(source) = source.upgrade() else {
            return;
        };
        if let Ok(id) = std::str::from_utf8(&message.payload) {
            source.cancel_here(id);
        }
    }
}
