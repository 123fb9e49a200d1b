//! `/mcp/{pool}`: one MCP endpoint (the Streamable HTTP transport) over a
//! pool of stdio MCP servers (`protocol = "json-rpc"`).
//!
//! - `POST` takes one JSON-RPC message. `initialize` opens a session
//!   (answered from the worker's warm handshake, with the
//!   `Mcp-Session-Id` of the session); a request is relayed to the
//!   session's worker and answered as an SSE stream (the worker's
//!   notifications and requests, then the response) or, for a client that
//!   accepts only JSON, as the response alone; a notification or a
//!   response is answered 202.
//! - `GET` opens the session's stream for the worker's messages outside
//!   any request.
//! - `DELETE` ends the session.
//!
//! An `exclusive` session holds one worker for its life ([`task`]); a
//! `shared` session's requests are jobs on any free worker. The client's
//! `notifications/cancelled`, a hang-up while a request runs and the
//! pool's `job_timeout` cancel the request on the worker (kept if it
//! confirms within `cancel_grace`). A hang-up ends an exclusive session.

mod config;
mod session;
mod task;
mod transport;

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kennel::{Pool, Priority};
use kennel_process::{Coprocess, Relay};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub(crate) use self::config::{McpConfig, SessionKind};
pub(crate) use self::session::Sessions;
use self::session::{MAX_IN_FLIGHT, STREAM_BUFFER, Session, Target};
use self::task::{Command, Rules, error_response};
use self::transport::{
    PROTOCOL_VERSIONS, SESSION_HEADER, answer, bad_version, one, refuse, refuse_api, served,
    session_of, streams,
};
use crate::ops::openapi::RpcErrorBody;
use crate::segment::Segment;
use crate::state::AppState;
use crate::tenants::Caller;
use crate::watch::pool_error;

/// `POST /mcp/{pool}`: one JSON-RPC message of the client's.
#[utoipa::path(
    post,
    path = "/mcp/{name}",
    tag = "jobs",
    params(
        ("name" = String, Path, description = "the pool's name (a pool with `protocol = \"json-rpc\"`)"),
        ("Mcp-Session-Id" = Option<String>, Header, description = "the session, as `initialize` answered it; every message but `initialize` carries it"),
        ("MCP-Protocol-Version" = Option<String>, Header, description = "the protocol version `initialize` agreed (2025-11-25, 2025-06-18, 2025-03-26 or 2024-11-05)"),
    ),
    request_body(content = Value, description = "one JSON-RPC message: a request, a notification, or a response to a request of the server's"),
    responses(
        (status = 200, description = "a request's answer: an SSE stream of `message` events (the server's notifications and requests, then the response) for a client that accepts `text/event-stream`, else the response as JSON; `initialize` also sets `Mcp-Session-Id`"),
        (status = 202, description = "a notification or a response was taken"),
        (status = 400, description = "not one JSON-RPC message (or not JSON), no `Mcp-Session-Id`, or a protocol version this server does not speak", body = RpcErrorBody),
        (status = 404, description = "no such pool, a pool that does not serve MCP, or a session that ended", body = RpcErrorBody),
        (status = 413, description = "the body is over `body_limit`", body = RpcErrorBody),
        (status = 501, description = "no pool is configured", body = RpcErrorBody),
        (status = 503, description = "`initialize` found no worker within `attach_wait`, or the service holds its most sessions (with `Retry-After`)", body = RpcErrorBody),
    )
)]
pub(crate) async fn post(
    State(state): State<AppState>,
    Segment(name): Segment,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (pool, config) = match served(&state, &name) {
        Ok(served) => served,
        Err(refusal) => return *refusal,
    };
    if let Some(refusal) = bad_version(&headers) {
        return refusal;
    }
    let message = match state.bodies().json_bytes(body).await {
        Ok(bytes) => serde_json::from_slice::<Value>(bytes.as_bytes()).unwrap_or(Value::Null),
        Err(e) => return refuse_api(e),
    };
    if !message.is_object() {
        return refuse(
            StatusCode::BAD_REQUEST,
            -32600,
            "a message is one JSON-RPC object (batches are not served)",
        );
    }
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let id = message.get("id").filter(|id| !id.is_null()).cloned();
    let sse = streams(&headers);
    if let (Some("initialize"), Some(_)) = (method.as_deref(), &id) {
        if headers.contains_key(SESSION_HEADER) {
            return refuse(
                StatusCode::BAD_REQUEST,
                -32600,
                "initialize opens a session; this one names a session already",
            );
        }
        return initialize(&state, name, pool, config, message, sse, caller).await;
    }
    let session = match session_of(&state, &name, &headers, &caller) {
        Ok(session) => session,
        Err(refusal) => return *refusal,
    };
    session.touch();
    match (method.as_deref(), id) {
        (Some("ping"), Some(id)) => {
            answer(sse, one(json!({"jsonrpc": "2.0", "id": id, "result": {}}))).await
        }
        (Some(_), Some(id)) => request(pool, session, id, message, sse).await,
        (Some(method), None) => {
            notification(&session, method, message).await;
            StatusCode::ACCEPTED.into_response()
        }
        (None, Some(_)) => {
            session.answer(message);
            StatusCode::ACCEPTED.into_response()
        }
        (None, None) => refuse(
            StatusCode::BAD_REQUEST,
            -32600,
            "not a JSON-RPC request, notification or response",
        ),
    }
}

/// `initialize`: a worker for an exclusive session (or the handshake of
/// any for a shared one), the session and its task, and the worker's
/// handshake as the answer.
async fn initialize(
    state: &AppState,
    name: String,
    pool: Pool<Coprocess>,
    config: McpConfig,
    message: Value,
    sse: bool,
    caller: Caller,
) -> Response {
    let params = message.get("params");
    let asked = params
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    let version = asked
        .filter(|v| PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSIONS[0]);
    let handshake = |w: &Coprocess| {
        w.handshake_result()
            .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
    };
    let options = caller.run_options(None, Priority::Normal);
    let attached = match config.sessions {
        SessionKind::Exclusive => {
            let options = options.lend_timeout(config.attach_wait.0);
            pool.lend_with(&options).await.map(|lease| {
                let result = handshake(&lease);
                (Some(lease), result)
            })
        }
        SessionKind::Shared => pool
            .run_with(options, async |w: &mut Coprocess| handshake(w))
            .await
            .map(|r| (None, r)),
    };
    let (lease, result) = match attached {
        Ok(attached) => attached,
        Err(e) => {
            let wait = pool.projected_wait();
            return refuse_api(pool_error(e, None, None).await.retry_after_projected(wait));
        }
    };
    let mut result = result.unwrap_or_else(
        || json!({"capabilities": {}, "serverInfo": {"name": name, "version": ""}}),
    );
    result["protocolVersion"] = version.into();
    let (commands, inbox) = mpsc::channel(MAX_IN_FLIGHT);
    let capabilities = params.and_then(|p| p.get("capabilities"));
    let session = Arc::new(Session::new(
        name,
        config.sessions,
        capabilities,
        commands,
        caller,
    ));
    if !state.mcp().insert(session.clone()) {
        // The lease, if any, goes back as it came.
        let mut refusal = refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            -32000,
            "the service holds its most sessions",
        );
        refusal
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return refusal;
    }
    let options = pool.options();
    let rules = Rules {
        idle: config.session_idle.0,
        job_timeout: options.job_timeout,
        cancel_grace: options.cancel_grace,
        reuse: config.reuse_after_session,
    };
    tokio::spawn(task::run(
        session.clone(),
        state.mcp().clone(),
        inbox,
        lease,
        rules,
        state.shutdown_signal(),
    ));
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let mut response = answer(
        sse,
        one(json!({"jsonrpc": "2.0", "id": id, "result": result})),
    )
    .await;
    if let Ok(value) = HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// A request of the client's: to the session's task (exclusive) or a job
/// of its own (shared); answered as it goes.
async fn request(
    pool: Pool<Coprocess>,
    session: Arc<Session>,
    id: Value,
    message: Value,
    sse: bool,
) -> Response {
    let Some(cancel) = session.begin(&id) else {
        let message = format!("the session has {MAX_IN_FLIGHT} requests in flight");
        return answer(sse, one(error_response(&id, &message, "limit"))).await;
    };
    let (stream, rx) = mpsc::channel(STREAM_BUFFER);
    match session.kind {
        SessionKind::Exclusive => {
            let command = Command::Request {
                message,
                stream,
                cancel,
                relayed: sse,
            };
            if session.task.send(command).await.is_err() {
                session.finish(&id);
                return refuse(
                    StatusCode::NOT_FOUND,
                    -32001,
                    "no such session (it ended): send initialize again",
                );
            }
        }
        SessionKind::Shared => {
            tokio::spawn(shared(pool, session, id, message, stream, sse, cancel));
        }
    }
    answer(sse, rx).await
}

/// A shared session's request: a job on any free worker. Dropped by a
/// cancel or a hang-up, the job is cancelled on its worker by the pool.
async fn shared(
    pool: Pool<Coprocess>,
    session: Arc<Session>,
    id: Value,
    message: Value,
    stream: mpsc::Sender<Value>,
    relayed: bool,
    cancel: CancellationToken,
) {
    let (answers_tx, answers) = mpsc::channel(16);
    let target = if relayed {
        Target::Stream(stream.clone())
    } else {
        Target::Session
    };
    let mut relay = Relay::new(session.forwarder(target, answers_tx), answers);
    let options = session.caller.run_options(None, Priority::Normal);
    let run = pool.run_with(options, async |w: &mut Coprocess| {
        w.relay(&message, &mut relay).await
    });
    let response = tokio::select! {
        reply = run => Some(match reply {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => error_response(&id, &e.to_string(), "worker"),
            Err(e) => {
                let e = pool_error(e, None, None).await;
                error_response(&id, &e.to_string(), e.kind())
            }
        }),
        () = cancel.cancelled() => None,
        () = stream.closed() => None,
    };
    session.finish(&id);
    if let Some(response) = response {
        let _ = stream.send(response).await;
    }
}

/// A notification of the client's: a cancel cancels its request;
/// `notifications/initialized` was the gateway's to send at warm-up; any
/// other goes to an exclusive session's worker.
async fn notification(session: &Session, method: &str, message: Value) {
    match method {
        "notifications/cancelled" => {
            if let Some(id) = message.get("params").and_then(|p| p.get("requestId")) {
                session.cancel(id);
            }
        }
        "notifications/initialized" => {}
        _ => {
            if session.kind == SessionKind::Exclusive {
                let params = message.get("params").cloned();
                let _ = session
                    .task
                    .send(Command::Notify {
                        method: method.to_owned(),
                        params,
                    })
                    .await;
            }
        }
    }
}

/// `GET /mcp/{pool}`: the session's stream of the worker's messages
/// outside any request.
#[utoipa::path(
    get,
    path = "/mcp/{name}",
    tag = "jobs",
    params(
        ("name" = String, Path, description = "the pool's name"),
        ("Mcp-Session-Id" = String, Header, description = "the session"),
    ),
    responses(
        (status = 200, description = "an SSE stream of `message` events: the server's notifications and requests outside any request, until the session ends; a second GET takes the place of the first", content_type = "text/event-stream"),
        (status = 400, description = "no `Mcp-Session-Id`", body = RpcErrorBody),
        (status = 404, description = "no such pool or session", body = RpcErrorBody),
        (status = 406, description = "the client does not accept `text/event-stream`", body = RpcErrorBody),
    )
)]
pub(crate) async fn open_stream(
    State(state): State<AppState>,
    Segment(name): Segment,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Response {
    let session = match session_of(&state, &name, &headers, &caller) {
        Ok(session) => session,
        Err(refusal) => return *refusal,
    };
    if !streams(&headers) {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            -32600,
            "the stream is text/event-stream (allowed: Accept: text/event-stream)",
        );
    }
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    session.open_stream(tx);
    answer(true, rx).await
}

/// `DELETE /mcp/{pool}`: ends the session; an exclusive session's worker
/// is replaced (or goes back, with `reuse_after_session`).
#[utoipa::path(
    delete,
    path = "/mcp/{name}",
    tag = "jobs",
    params(
        ("name" = String, Path, description = "the pool's name"),
        ("Mcp-Session-Id" = String, Header, description = "the session"),
    ),
    responses(
        (status = 204, description = "the session ended"),
        (status = 400, description = "no `Mcp-Session-Id`", body = RpcErrorBody),
        (status = 404, description = "no such pool or session", body = RpcErrorBody),
    )
)]
pub(crate) async fn end(
    State(state): State<AppState>,
    Segment(name): Segment,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Response {
    match session_of(&state, &name, &headers, &caller) {
        Ok(session) => {
            session.ended.cancel();
            StatusCode::NO_CONTENT.into_response()
        }
        Err(refusal) => *refusal,
    }
}
