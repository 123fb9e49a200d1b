//! `ApiError`: every error the service answers, as a status code and a JSON
//! body `{ "error": kind, "message": … }`.

use std::time::Duration;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kennel::RejectReason;
use serde_json::{Value, json};

mod from;

pub(crate) use self::from::with_last_words;

/// An error the service answers with: its kinds and statuses are the table
/// in docs/SERVICE.md, "Errors".
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiError {
    /// No pool is configured: the router was built without one.
    NotSupported,
    /// No pool of this name.
    NoSuchPool {
        /// The name asked for.
        name: String,
    },
    /// No pool is in this group.
    NoSuchGroup {
        /// The group asked for.
        group: String,
    },
    /// No asynchronous job of this id (never, or forgotten after
    /// `result_ttl`).
    NoSuchJob {
        /// The id asked for.
        id: String,
    },
    /// No route at this path.
    NotFound,
    /// The route does not take this method.
    MethodNotAllowed,
    /// The body is not valid JSON.
    BadJson {
        /// What the parser said.
        message: String,
    },
    /// The query string or another part of the request is not understood.
    BadRequest {
        /// What was wrong.
        message: String,
    },
    /// The job's key breaks a rule: kennel's (1 to 256 bytes of printable
    /// ASCII), the pool's `key_pattern`, or the pointer's value is not a
    /// string.
    BadKey {
        /// The rule broken.
        message: String,
    },
    /// A reconfiguration body has an unknown key or a bad value.
    BadConfig {
        /// The key and what is allowed.
        message: String,
    },
    /// A bearer token is required and was missing or wrong.
    Unauthorized,
    /// The request's `Host` is not allowed, or a browser sent it from
    /// another site.
    Forbidden {
        /// What was refused and what is allowed.
        message: String,
    },
    /// The body did not arrive within the server's `body_timeout`.
    BodyTimeout {
        /// The timeout.
        after: Duration,
    },
    /// The body is over the limit.
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The pool turned the job away at once (queue full, projected wait).
    Rejected {
        /// Why.
        reason: RejectReason,
        /// The `Retry-After` to send, in seconds.
        retry_after: u64,
    },
    /// The caller's tenant is over its limits (429).
    TenantLimit {
        /// Which limit.
        message: String,
        /// The `Retry-After` to send: the tenant's own projected wait.
        retry_after: u64,
    },
    /// No pool of the group could lend a worker at once.
    NoMembers {
        /// The group.
        group: String,
    },
    /// No worker was free within the wait allowed.
    LendTimeout {
        /// The wait.
        after: Duration,
        /// The `Retry-After` to send, in seconds.
        retry_after: u64,
    },
    /// The pool's workers keep failing to start (its crash-loop breaker is
    /// open): the job was turned away at once.
    Unavailable {
        /// What the last failed start said.
        last_failure: String,
        /// The last words of the worker whose start failed last, when known.
        stderr: Vec<String>,
        /// The `Retry-After` to send: whole seconds to the next trial start,
        /// at least 1.
        retry_after: u64,
    },
    /// The pool is closed or closing.
    Closed,
    /// The job ran past its time limit; its worker was killed.
    Timeout {
        /// The limit.
        after: Duration,
    },
    /// The worker ended before it replied.
    Crashed {
        /// What is known of how it ended.
        message: String,
        /// The worker's last words: the tail of its stderr.
        stderr: Vec<String>,
    },
    /// The worker started for this job failed its warm-up.
    WarmupFailed {
        /// What went wrong.
        message: String,
        /// The worker's last words: the tail of its stderr.
        stderr: Vec<String>,
    },
    /// The worker could not load the job's key; it keeps its other keys.
    LoadFailed {
        /// The key and what the worker said.
        message: String,
    },
    /// The worker broke the protocol (bad output); it was killed.
    Protocol {
        /// What was wrong.
        message: String,
        /// The worker's last words: the tail of its stderr.
        stderr: Vec<String>,
    },
    /// The worker replied with an error of its own.
    Worker {
        /// The worker's message.
        message: String,
        /// The HTTP status it asked for (its `status` field, 400 to 599);
        /// 500 otherwise.
        status: Option<u16>,
        /// Its other fields, sent in the body beside `error` and `message`.
        fields: serde_json::Map<String, Value>,
    },
    /// A queued job's reply is over the NATS server's `max_payload`, so it
    /// could not be published.
    ReplyTooLarge {
        /// The reply's size in bytes.
        size: usize,
        /// The server's `max_payload`.
        limit: usize,
    },
    /// The job could not be put on the pool's queue (the NATS server is
    /// unreachable or refused it).
    QueueUnavailable {
        /// What went wrong.
        message: String,
    },
    /// The job is on the pool's queue but its result did not come within
    /// the queue's `reply_timeout`; it may still run.
    QueueTimeout {
        /// The wait.
        after: Duration,
        /// The job's id.
        id: String,
    },
    /// The job was handed to the NATS connection but the stream did not
    /// confirm that it stored it: it may run (as job `id`), or not.
    QueueUnconfirmed {
        /// The job's id (its `Nats-Msg-Id`).
        id: String,
        /// What went wrong.
        message: String,
    },
    /// Something the client cannot fix; the detail is logged, not sent.
    Internal {
        /// The detail, for the log.
        detail: String,
    },
}

/// The `Retry-After` the service sends with a 503 for a rejected job, in
/// seconds, when the pool knows no job time yet (and for a group).
pub(crate) const RETRY_AFTER_SECS: u64 = 1;

/// The longest `Retry-After` the service sends, in seconds.
pub(crate) const MAX_RETRY_AFTER_SECS: u64 = 60;

impl ApiError {
    /// The stable kind string, the `error` field of the body.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotSupported => "not-supported",
            Self::NoSuchPool { .. } => "no-such-pool",
            Self::NoSuchGroup { .. } => "no-such-group",
            Self::NoSuchJob { .. } => "no-such-job",
            Self::NotFound => "not-found",
            Self::MethodNotAllowed => "method-not-allowed",
            Self::BadJson { .. } => "bad-json",
            Self::BadRequest { .. } => "bad-request",
            Self::BadKey { .. } => "bad-key",
            Self::BadConfig { .. } => "bad-config",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden { .. } => "forbidden",
            Self::BodyTimeout { .. } => "request-timeout",
            Self::TooLarge { .. } => "too-large",
            Self::Rejected { .. } => "rejected",
            Self::TenantLimit { .. } => "tenant-limit",
            Self::NoMembers { .. } => "no-members",
            Self::LendTimeout { .. } => "lend-timeout",
            Self::Unavailable { .. } => "unavailable",
            Self::Closed => "closed",
            Self::Timeout { .. } => "timeout",
            Self::Crashed { .. } => "crashed",
            Self::WarmupFailed { .. } => "warmup-failed",
            Self::Protocol { .. } => "protocol",
            Self::LoadFailed { .. } => "load-failed",
            Self::Worker { .. } => "worker-error",
            Self::ReplyTooLarge { .. } => "reply-too-large",
            Self::QueueUnavailable { .. } => "queue-unavailable",
            Self::QueueTimeout { .. } => "queue-timeout",
            Self::QueueUnconfirmed { .. } => "queue-unconfirmed",
            Self::Internal { .. } => "internal",
        }
    }

    /// The status code.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NotSupported => StatusCode::NOT_IMPLEMENTED,
            Self::NoSuchPool { .. }
            | Self::NoSuchGroup { .. }
            | Self::NoSuchJob { .. }
            | Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::BadJson { .. }
            | Self::BadRequest { .. }
            | Self::BadKey { .. }
            | Self::BadConfig { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::TenantLimit { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Rejected { .. }
            | Self::NoMembers { .. }
            | Self::LendTimeout { .. }
            | Self::Unavailable { .. }
            | Self::Closed
            | Self::QueueUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Timeout { .. } | Self::QueueTimeout { .. } | Self::QueueUnconfirmed { .. } => {
                StatusCode::GATEWAY_TIMEOUT
            }
            Self::Crashed { .. }
            | Self::WarmupFailed { .. }
            | Self::Protocol { .. }
            | Self::LoadFailed { .. }
            | Self::ReplyTooLarge { .. } => StatusCode::BAD_GATEWAY,
            Self::Worker {
                status: Some(status),
                ..
            } => StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Self::Worker { .. } | Self::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message sent to the client.
    pub fn message(&self) -> String {
        match self {
            Self::NotSupported => "no worker pool is configured".into(),
            Self::NoSuchPool { name } => format!("no pool named `{name}`"),
            Self::NoSuchGroup { group } => format!("no pool is in group `{group}`"),
            Self::NoSuchJob { id } => {
                format!("no job {id:?} (never accepted, or ended longer ago than result_ttl)")
            }
            Self::NotFound => "no such route".into(),
            Self::MethodNotAllowed => "this route does not take this method".into(),
            Self::BadJson { message } => format!("the body is not valid JSON: {message}"),
            Self::BadRequest { message }
            | Self::BadKey { message }
            | Self::LoadFailed { message }
            | Self::BadConfig { message }
            | Self::Forbidden { message }
            | Self::TenantLimit { message, .. } => message.clone(),
            Self::BodyTimeout { after } => format!(
                "the body did not arrive within {}",
                humantime::format_duration(*after)
            ),
            Self::Unauthorized => "a valid bearer token is required".into(),
            Self::TooLarge { limit } => {
                format!("the body is over the {limit}-byte limit")
            }
            Self::Rejected { reason, .. } => {
                format!("job rejected: {reason} ({})", reason.as_str())
            }
            Self::NoMembers { group } => {
                format!("no pool in group `{group}` can lend a worker now")
            }
            Self::LendTimeout { after, .. } => format!("no worker was free within {after:?}"),
            Self::Unavailable {
                last_failure,
                retry_after,
                ..
            } => format!(
                "the pool is unavailable: its workers keep failing to start \
                 (last: {last_failure}); next try in {retry_after} s"
            ),
            Self::Closed => "pool is closed".into(),
            Self::Timeout { after } => format!(
                "job exceeded its {} timeout",
                humantime::format_duration(*after)
            ),
            Self::Crashed { message, .. }
            | Self::WarmupFailed { message, .. }
            | Self::Protocol { message, .. }
            | Self::Worker { message, .. } => message.clone(),
            Self::ReplyTooLarge { size, limit } => format!(
                "the reply ({size} bytes) is over the NATS server's {limit}-byte max_payload"
            ),
            Self::QueueUnavailable { message } => {
                format!("the job could not be queued: {message}")
            }
            Self::QueueTimeout { after, id } => format!(
                "the job is queued but its result did not come within {}; it may still run, as job {id} (GET /jobs/{id} gives its result)",
                humantime::format_duration(*after)
            ),
            Self::QueueUnconfirmed { id, message } => format!(
                "the queue did not confirm that it stored the job ({message}): it may still run, as job {id}"
            ),
            Self::Internal { .. } => "internal error".into(),
        }
    }

    /// The `Retry-After` this answer carries, in seconds.
    fn retry_after(&self) -> Option<u64> {
        match self {
            Self::Rejected { retry_after, .. }
            | Self::TenantLimit { retry_after, .. }
            | Self::LendTimeout { retry_after, .. }
            | Self::Unavailable { retry_after, .. } => Some(*retry_after),
            Self::NoMembers { .. } | Self::QueueUnavailable { .. } => Some(RETRY_AFTER_SECS),
            _ => None,
        }
    }

    /// The worker's last words this answer carries (the `stderr` field of
    /// its body): the tail of the stderr of the worker that failed. Empty
    /// when there are none.
    pub fn stderr(&self) -> &[String] {
        match self {
            Self::Crashed { stderr, .. }
            | Self::WarmupFailed { stderr, .. }
            | Self::Protocol { stderr, .. }
            | Self::Unavailable { stderr, .. } => stderr,
            _ => &[],
        }
    }

    /// Sets the `Retry-After` of a rejection or a lend timeout to the pool's
    /// projected wait ([`kennel::Pool::projected_wait`]), rounded up to whole
    /// seconds, within 1 and `MAX_RETRY_AFTER_SECS`; with no projection it
    /// stays `RETRY_AFTER_SECS`.
    #[must_use]
    pub(crate) fn retry_after_projected(mut self, wait: Option<Duration>) -> Self {
        if let Self::Rejected { retry_after, .. } | Self::LendTimeout { retry_after, .. } =
            &mut self
            && let Some(wait) = wait
        {
            *retry_after = from::whole_secs(wait).min(MAX_RETRY_AFTER_SECS);
        }
        self
    }

    /// The JSON body: `error` (the kind) and `message`, and what the kind
    /// adds (`reason`, `stderr`, a worker error's own fields). Logs it.
    pub fn body(&self) -> Value {
        let status = self.status();
        if let Self::Internal { detail } = &self {
            tracing::error!(target: "kennel_server", %detail, "internal error");
        } else if status.is_server_error() {
            tracing::debug!(target: "kennel_server", kind = self.kind(), message = %self.message(), "job failed");
        }
        let mut body = json!({ "error": self.kind(), "message": self.message() });
        if let Self::Rejected { reason, .. } = &self {
            body["reason"] = reason.as_str().into();
        }
        if !self.stderr().is_empty() {
            body["stderr"] = self.stderr().into();
        }
        if let (Self::Worker { fields, .. }, Some(map)) = (self, body.as_object_mut()) {
            for (k, v) in fields {
                if k != "error" && k != "message" {
                    map.insert(k.clone(), v.clone());
                }
            }
        }
        body
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind(), self.message())
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = self.body();
        let mut response = (status, Json(body)).into_response();
        if let Some(secs) = self.retry_after() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if matches!(self, Self::Unauthorized) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests;
