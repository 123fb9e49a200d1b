//! How a job's answer goes out: the reply as the worker wrote it
//! (`application/json`), or, for a client that asks with `Accept:
//! text/event-stream` or `application/x-ndjson`, each progress item as it
//! comes and the reply (or the error) last.

use std::future::Future;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use kennel_process::JsonBytes;
use kennel_process::Progress;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use crate::error::ApiError;

/// How many progress items may wait for a slow client; more are dropped
/// (the reply never is).
pub(crate) const PROGRESS_BUFFER: usize = 256;

/// What the client asked for in its `Accept` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The reply only, as JSON (a plain request).
    Plain,
    /// Server-sent events: `progress` events, then one `result` (or
    /// `error`) event.
    EventStream,
    /// One JSON object per line: the progress items, then
    /// `{"result": …}` (or the error's body).
    Ndjson,
}

impl Answer {
    /// Reads the `Accept` header: `text/event-stream` or
    /// `application/x-ndjson` (the first one named) stream; anything else
    /// is plain.
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .find_map(|v| {
                let kind = v.split(';').next()?.trim().to_ascii_lowercase();
                match kind.as_str() {
                    "text/event-stream" => Some(Self::EventStream),
                    "application/x-ndjson" => Some(Self::Ndjson),
                    _ => None,
                }
            })
            .unwrap_or(Self::Plain)
    }
}

/// Runs `job` (given a sender of progress items when the client streams)
/// and answers as `answer` says. A job that fails before its first
/// progress item answers with its error's status, as a plain request
/// would; once streaming began, an error is the last item.
///
/// # Cancel safety
///
/// Dropping this future before it answers drops `job`'s future with it:
/// what a job does when dropped is its own (the service's job routes hand
/// a job that already holds a worker to a task of its own, which lets it
/// finish). A streamed job runs on a task the response body holds, and ends
/// when the client hangs up.
pub(crate) async fn respond<F, Fut>(answer: Answer, job: F) -> Response
where
    F: FnOnce(Option<mpsc::Sender<Progress>>) -> Fut,
    Fut: Future<Output = Result<JsonBytes, ApiError>> + Send + 'static,
{
    if answer == Answer::Plain {
        return match job(None).await {
            // The reply's bytes as the worker wrote them become the body.
            Ok(reply) => (
                [(header::CONTENT_TYPE, "application/json")],
                Body::from(reply.into_bytes()),
            )
                .into_response(),
            Err(e) => e.into_response(),
        };
    }
    let (tx, rx) = mpsc::channel(PROGRESS_BUFFER);
    let mut items = Box::pin(items(job(Some(tx)), rx));
    // The first item decides the status: an error before any progress is
    // answered as such.
    let first = items.next().await;
    if let Some(Item::End(Err(e))) = first {
        return e.into_response();
    }
    let items = stream::iter(first).chain(items);
    match answer {
        Answer::EventStream => {
            Sse::new(items.map(|item| Ok::<_, std::convert::Infallible>(item.sse())))
                .into_response()
        }
        _ => {
            let lines = items.map(|item| {
                let mut line = item.line();
                line.push('\n');
                Ok::<_, std::convert::Infallible>(line)
            });
            (
                [(header::CONTENT_TYPE, "application/x-ndjson")],
                Body::from_stream(lines),
            )
                .into_response()
        }
    }
}

enum Item {
    Progress(Progress),
    End(Result<JsonBytes, ApiError>),
}

impl Item {
    fn sse(&self) -> SseEvent {
        match self {
            Self::Progress(p) => SseEvent::default()
                .event("progress")
                .data(p.to_json().to_string()),
            Self::End(Ok(reply)) => SseEvent::default().event("result").data(reply.as_str()),
            Self::End(Err(e)) => SseEvent::default()
                .event("error")
                .data(error_json(e).to_string()),
        }
    }

    /// The item as one line of NDJSON, without its newline.
    fn line(&self) -> String {
        match self {
            Self::Progress(p) => p.to_json().to_string(),
            // `{"result": …}` with the reply's bytes as written (a reply
            // held to one line: a Content-Length frame may span several).
            Self::End(Ok(reply)) => {
                let reply = reply.as_str().replace(['\n', '\r'], " ");
                format!("{{\"result\":{reply}}}")
            }
            Self::End(Err(e)) => error_json(e).to_string(),
        }
    }
}

/// An error's body with its HTTP status in `status` (the stream's own
/// status is 200 by then).
fn error_json(e: &ApiError) -> Value {
    let mut body = e.body();
    if body.get("status").is_none() {
        body["status"] = json!(e.status().as_u16());
    }
    body
}

/// Progress as it comes, then the end. The job runs on a task of its own,
/// aborted when the stream is dropped (the client hung up); its progress
/// sender goes with it, so the progress ends before the end comes.
fn items(
    job: impl Future<Output = Result<JsonBytes, ApiError>> + Send + 'static,
    rx: mpsc::Receiver<Progress>,
) -> impl Stream<Item = Item> + Send {
    let job = AbortOnDropHandle::new(tokio::spawn(job));
    let progress = stream::unfold(rx, async |mut rx| {
        Some((Item::Progress(rx.recv().await?), rx))
    });
    progress.chain(stream::once(async move {
        Item::End(job.await.unwrap_or_else(|e| {
            Err(ApiError::Internal {
                detail: format!("the job's task failed: {e}"),
            })
        }))
    }))
}
