//! Fetching: one task per queued pool asks the consumer for as many
//! messages as the pool has credits ([`credits`]), in pull requests that
//! wait on the server for at most [`PULL_EXPIRES`]. Each message received
//! becomes a job task. Nothing is prefetched: a request never asks for more
//! than the workers that can take a job now.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use futures_util::StreamExt;

use super::credit::credits;
use super::{PULL_EXPIRES, Source};
use crate::lock;

/// How often the credits are looked at again when nothing woke the task (a
/// worker freed by a job that did not come from the queue, a worker that
/// became ready).
const RECHECK: Duration = Duration::from_millis(100);

/// The wait after a pull request failed (the server unreachable, the
/// consumer gone) before its credits are asked for again.
const RETRY: Duration = Duration::from_secs(1);

/// Fetches until the drain begins.
pub(super) async fn fetch(source: Arc<Source>) {
    while !source.is_draining() {
        let want = {
            let mut counts = lock(&source.counts);
            let want = credits(&source.pool.stats(), counts.unplaced, counts.asked);
            counts.asked += want;
            want
        };
        if want > 0 {
            let puller = source.clone();
            source.tasks.spawn(pull(puller, want));
        }
        tokio::select! {
            () = source.wake.notified() => {}
            () = tokio::time::sleep(RECHECK) => {}
        }
    }
    tracing::debug!(target: "kennel_server", pool = %source.name, "stopped fetching");
}

/// One pull request for `want` messages.
async fn pull(source: Arc<Source>, want: usize) {
    let mut received = 0;
    match source
        .consumer
        .batch()
        .max_messages(want)
        .expires(PULL_EXPIRES)
        .messages()
        .await
    {
        Ok(mut batch) => {
            while let Some(next) = batch.next().await {
                match next {
                    Ok(message) => {
                        received += 1;
                        arrived(&source, message);
                    }
                    Err(e) => {
                        tracing::warn!(target: "kennel_server", pool = %source.name, error = %e, "a pull request failed");
                        tokio::time::sleep(RETRY).await;
                        break;
                    }
                }
            }
        }
        Err(e) => {
            tracing::warn!(target: "kennel_server", pool = %source.name, error = %e, "cannot ask for messages");
            tokio::time::sleep(RETRY).await;
        }
    }
    lock(&source.counts).asked -= want - received;
    source.wake.notify_one();
    if received == 0 {
        // Nothing came: a good time to learn the stream's backlog.
        match source.consumer.get_info().await {
            Ok(info) => source.pending(info.num_pending),
            Err(e) => {
                tracing::debug!(target: "kennel_server", pool = %source.name, error = %e, "no consumer info");
            }
        }
    }
}

/// A message received: a job task, or, once the drain began, handed back
/// at once.
fn arrived(source: &Arc<Source>, message: jetstream::Message) {
    source.metrics.fetched.increment(1);
    source.metrics.held.increment(1.0);
    let draining = {
        let mut counts = lock(&source.counts);
        counts.asked -= 1;
        let draining = source.is_draining();
        counts.unplaced += usize::from(!draining);
        draining
    };
    let job = source.clone();
    if draining {
        source.tasks.spawn(super::job::hand_back(job, message));
    } else {
        source.tasks.spawn(super::job::handle(job, message));
    }
}
