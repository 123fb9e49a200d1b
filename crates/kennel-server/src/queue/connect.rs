//! The connection of one pool's queue: the NATS client, the stream (made
//! if asked to) and the durable pull consumer every instance shares.

use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};
use async_nats::jetstream::stream::{self, RetentionPolicy, StorageType};
use async_nats::jetstream::{self, Context};
use async_nats::{Client, ConnectOptions};

use super::config::QueueConfig;

/// How long the first connection may take before `serve` gives up.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A refusal: the key under `queue.` (empty for the whole table) and why.
type Refusal = (&'static str, String);

/// Connects to the queue's server and makes sure its stream and consumer
/// exist, with the consumer's settings as configured (a consumer that
/// exists is updated to them, as JetStream allows).
pub(super) async fn connect(
    pool: &str,
    queue: &QueueConfig,
    instance: &str,
) -> Result<(Client, Context, PullConsumer), Refusal> {
    let mut options = match &queue.creds_file {
        Some(path) => ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| ("creds_file", format!("cannot read {}: {e}", path.display())))?,
        None => ConnectOptions::new(),
    };
    if let Some(var) = &queue.token_env {
        let token = std::env::var(var)
            .ok()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ("token_env", format!("the variable {var} is unset or empty")))?;
        options = options.token(token);
    }
    let client = options
        .name(format!("kennel {instance} pool {pool}"))
        .connection_timeout(CONNECT_TIMEOUT)
        .connect(queue.nats.as_str())
        .await
        .map_err(|e| ("nats", format!("cannot connect to {}: {e}", queue.nats)))?;
    let mut js = jetstream::new(client.clone());
    js.set_timeout(super::REQUEST_TIMEOUT);
    let stream = if queue.create {
        js.get_or_create_stream(stream::Config {
            name: queue.stream.clone(),
            subjects: vec![queue.subject.clone()],
            retention: RetentionPolicy::WorkQueue,
            storage: StorageType::File,
            ..Default::default()
        })
        .await
        .map_err(|e| {
            (
                "stream",
                format!("cannot find or create the stream {:?}: {e}", queue.stream),
            )
        })?
    } else {
        js.get_stream(&queue.stream).await.map_err(|e| {
            (
                "stream",
                format!(
                    "cannot find the stream {:?} (with `create = false` it must exist): {e}",
                    queue.stream
                ),
            )
        })?
    };
    let durable = queue.durable_name(pool).to_owned();
    let consumer = stream
        .create_consumer(pull::Config {
            durable_name: Some(durable.clone()),
            description: Some(format!("kennel pool {pool}")),
            filter_subject: queue.subject.clone(),
            deliver_policy: DeliverPolicy::All,
            ack_policy: AckPolicy::Explicit,
            ack_wait: queue.ack_wait.0,
            max_deliver: i64::from(queue.max_deliver),
            max_ack_pending: i64::from(queue.max_ack_pending),
            ..Default::default()
        })
        .await
        .map_err(|e| {
            (
                "durable",
                format!(
                    "cannot create or update the consumer {durable:?} on {:?} for {:?}: {e}",
                    queue.stream, queue.subject
                ),
            )
        })?;
    Ok((client, js, consumer))
}
