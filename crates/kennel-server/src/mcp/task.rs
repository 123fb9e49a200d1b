//! The task of a session: its idle clock, and for an exclusive session the
//! worker it holds, its requests one at a time, and the end of the worker
//! with the session.

use std::sync::Arc;
use std::time::Duration;

use kennel::{CancelOutcome, Lease, Worker};
use kennel_process::{Coprocess, ProcessError, Relay};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::session::{Session, Sessions, Target};

/// What a client sends an exclusive session's worker.
pub(crate) enum Command {
    /// A request: its answer (and the worker's messages meanwhile) go to
    /// `stream`; `cancel` is its `notifications/cancelled`.
    Request {
        message: Value,
        stream: mpsc::Sender<Value>,
        cancel: CancellationToken,
        /// The client reads the worker's messages on `stream` (else on
        /// its GET stream, if open).
        relayed: bool,
    },
    /// A notification, written as it is.
    Notify {
        method: String,
        params: Option<Value>,
    },
}

/// The rules a session's task keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    /// `session_idle`.
    pub(crate) idle: Duration,
    /// The pool's `job_timeout`, per request.
    pub(crate) job_timeout: Option<Duration>,
    /// The pool's `cancel_grace`.
    pub(crate) cancel_grace: Duration,
    /// `reuse_after_session`.
    pub(crate) reuse: bool,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// DELETE, or the service closing.
    Ended,
    /// No request and no stream for `session_idle`.
    Idle,
    /// The client hung up while a request ran.
    HungUp,
    /// The worker ended, broke the protocol, or did not stop a cancelled
    /// request.
    WorkerLost,
}

/// Runs session `session` until it ends, then takes it out of `sessions`;
/// an exclusive session's `lease` goes back (with `reuse`) or is
/// discarded, or failed when the worker was lost.
pub(crate) async fn run(
    session: Arc<Session>,
    sessions: Sessions,
    mut commands: mpsc::Receiver<Command>,
    mut lease: Option<Lease<Coprocess>>,
    rules: Rules,
    shutdown: impl Future<Output = ()> + Send,
) {
    tokio::pin!(shutdown);
    let (answers_tx, answers) = mpsc::channel(16);
    let mut relay = Relay::new(session.forwarder(Target::Session, answers_tx), answers);
    let end = loop {
        let idle_at = session.idle_since().map_or_else(
            || tokio::time::Instant::now() + rules.idle,
            |t| t + rules.idle,
        );
        tokio::select! {
            () = session.ended.cancelled() => break End::Ended,
            () = &mut shutdown => break End::Ended,
            () = tokio::time::sleep_until(idle_at) => {
                if session.idle_since().is_some_and(|t| t.elapsed() >= rules.idle) {
                    break End::Idle;
                }
            }
            command = commands.recv() => match (command, lease.as_mut()) {
                (None, _) => break End::Ended,
                // A shared session's requests run as jobs of their own.
                (Some(_), None) => {}
                (Some(command), Some(lease)) => {
                    if let Some(end) = handle(lease, &mut relay, &session, command, rules).await {
                        break end;
                    }
                }
            },
            err = idle(lease.as_mut(), &mut relay) => {
                tracing::debug!(session = %session.id, %err, "the session's worker ended");
                break End::WorkerLost;
            }
        }
    };
    tracing::debug!(session = %session.id, pool = %session.pool, ?end, "MCP session ended");
    sessions.remove(&session.id);
    session.ended.cancel();
    session.close();
    if let Some(lease) = lease {
        match end {
            End::WorkerLost => lease.fail(),
            _ if rules.reuse => drop(lease),
            _ => lease.discard(),
        }
    }
}

/// Between requests: the worker's messages go to the client's GET stream;
/// without a worker, never resolves.
async fn idle(lease: Option<&mut Lease<Coprocess>>, relay: &mut Relay) -> ProcessError {
    match lease {
        Some(lease) => lease.relay_idle(relay).await,
        None => std::future::pending().await,
    }
}

/// How a request ended.
enum Outcome {
    Done(Result<Value, ProcessError>),
    Cancelled,
    HungUp,
    TimedOut(Duration),
}

/// Runs one command on the session's worker; the session's end, if it
/// ends.
async fn handle(
    lease: &mut Lease<Coprocess>,
    relay: &mut Relay,
    session: &Session,
    command: Command,
    rules: Rules,
) -> Option<End> {
    let (message, stream, cancel, relayed) = match command {
        Command::Notify { method, params } => {
            return match lease.notify(&method, params.as_ref()).await {
                Ok(()) => None,
                Err(_) => Some(End::WorkerLost),
            };
        }
        Command::Request {
            message,
            stream,
            cancel,
            relayed,
        } => (message, stream, cancel, relayed),
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    // Cancelled before its turn: never sent. Its client gone: the session
    // ends as for a hang-up mid-call.
    if cancel.is_cancelled() || stream.is_closed() {
        session.finish(&id);
        return (!cancel.is_cancelled()).then_some(End::HungUp);
    }
    session.route_to(relayed.then(|| stream.clone()));
    let outcome = tokio::select! {
        biased;
        () = cancel.cancelled() => Outcome::Cancelled,
        reply = lease.relay(&message, relay) => Outcome::Done(reply),
        () = stream.closed() => Outcome::HungUp,
        after = timeout(rules.job_timeout) => Outcome::TimedOut(after),
    };
    session.route_to(None);
    let end = match outcome {
        Outcome::Done(Ok(response)) => {
            let _ = stream.send(response).await;
            None
        }
        Outcome::Done(Err(err)) => {
            let _ = stream
                .send(error_response(&id, &err.to_string(), "worker"))
                .await;
            (!lease.is_alive()
                || matches!(
                    err,
                    ProcessError::Crashed { .. } | ProcessError::Protocol { .. }
                ))
            .then_some(End::WorkerLost)
        }
        Outcome::Cancelled | Outcome::HungUp | Outcome::TimedOut(_) => {
            let kept = lease.cancel(rules.cancel_grace).await == CancelOutcome::Kept;
            if let Outcome::TimedOut(after) = outcome {
                let message = format!("the request ran past the pool's job_timeout ({after:?})");
                let _ = stream.send(error_response(&id, &message, "timeout")).await;
            }
            // A client that cancelled its request may close its stream
            // before its cancel arrives: one whose cancel came while the
            // worker was asked to stop is still there.
            let hung_up = matches!(outcome, Outcome::HungUp) && !cancel.is_cancelled();
            match (kept, hung_up) {
                (false, _) => Some(End::WorkerLost),
                (true, true) => Some(End::HungUp),
                (true, false) => None,
            }
        }
    };
    session.finish(&id);
    end
}

/// Resolves after `limit`, or never without one.
async fn timeout(limit: Option<Duration>) -> Duration {
    match limit {
        Some(limit) => {
            tokio::time::sleep(limit).await;
            limit
        }
        None => std::future::pending().await,
    }
}

/// A JSON-RPC error response of kennel's to request `id`: code -32603,
/// `message`, and `data.kind` saying whose fault.
pub(crate) fn error_response(id: &Value, message: &str, kind: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message, "data": {"kind": kind}},
    })
}
