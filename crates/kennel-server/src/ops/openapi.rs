//! `GET /openapi.json`: the OpenAPI 3.1 description of every route, made by
//! `utoipa` from the handlers' `#[utoipa::path]` attributes and the types
//! below (the bodies the routes answer, each error's body).
//!
//! The bodies that `app.rs` writes with `json!` are described by the types
//! of this module; a test reads each route's real answer against them.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use kennel::Options;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::{OpenApi, PartialSchema, ToSchema};

use crate::ops::workers::{GpuJson, RetireDueJson, ThreadsJson, WorkerJson, WorkersBody};

/// The description of the service's routes.
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "kennel",
        description = "Named pools of long-lived, costly-to-start workers behind HTTP: a job is one JSON request to a worker, its answer the worker's JSON reply. Every error is `{\"error\": kind, \"message\": …}` (ErrorBody). With `server.token_env` or `[[tenant]]` tables set, every route but `/`, `/livez`, `/readyz` and `/healthz` asks for `Authorization: Bearer <token>` (401 `unauthorized` otherwise): the service's token, or a tenant's, which runs its jobs as that tenant and reaches only the routes it was given (403 `forbidden` otherwise). Before any route runs, a request whose `Host` is not allowed (`server.allowed_hosts`), or a browser's cross-site request (a foreign `Origin`, `Sec-Fetch-Site: cross-site`), is answered 403 `forbidden`; a body that does not arrive within `server.body_timeout` is 408 `request-timeout`."
    ),
    paths(
        crate::ops::page::page,
        crate::ops::pools::list_pools,
        crate::jobs::pool_job,
        crate::ops::pools::pool_stats,
        crate::ops::config_get::pool_config_get,
        crate::ops::pools::pool_config,
        crate::ops::workers::pool_workers,
        crate::queue::dead::pool_dead,
        crate::jobs::group_job,
        crate::async_jobs::routes::get_job,
        crate::async_jobs::routes::cancel_job,
        crate::async_jobs::routes::job_events,
        crate::mcp::post,
        crate::mcp::open_stream,
        crate::mcp::end,
        crate::ops::probes::readyz,
        crate::ops::probes::healthz,
        crate::ops::probes::livez,
        crate::metrics::render,
        crate::sse::events,
        crate::reload::route,
        serve,
    ),
    components(schemas(
        ErrorBody,
        RpcErrorBody,
        crate::async_jobs::JobView,
        RpcError,
        PoolStats,
        PoolStatsBody,
        TenantLoadBody,
        PoolEntryBody,
        PoolList,
        PoolConfigBody,
        ConfigActions,
        ReadyBody,
        LiveBody,
        WorkersBody,
        WorkerJson,
        RetireDueJson,
        ThreadsJson,
        GpuJson,
        crate::queue::dead::DeadBody,
        crate::queue::dead::DeadLetter,
    )),
    tags(
        (name = "jobs", description = "running jobs on workers"),
        (name = "pools", description = "the pools, their stats, workers and live config"),
        (name = "probes", description = "liveness and readiness; no token asked"),
        (name = "operators", description = "the status page, metrics, events and this description"),
    )
)]
pub(crate) struct ApiDoc;

/// This description.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operators",
    responses((status = 200, description = "the OpenAPI 3.1 description of every route", content_type = "application/json"))
)]
pub(crate) async fn serve() -> Response {
    // Made once.
    static JSON: OnceLock<String> = OnceLock::new();
    let json = JSON.get_or_init(|| {
        ApiDoc::openapi()
            .to_pretty_json()
            .unwrap_or_else(|e| format!("{{\"error\":\"internal\",\"message\":\"{e}\"}}"))
    });
    ([(header::CONTENT_TYPE, "application/json")], json.as_str()).into_response()
}

/// The body of every refusal of the MCP endpoint (`/mcp/{name}`): a
/// JSON-RPC error with no id, as MCP's transport answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RpcErrorBody {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// Always null.
    pub id: Option<Value>,
    /// The error: -32600 a bad message or header, -32601 a pool that does
    /// not serve MCP, -32001 a session that ended, -32000 kennel's own
    /// refusal (the message of its error, such as `lend-timeout`'s).
    pub error: RpcError,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RpcError {
    /// The JSON-RPC error code.
    pub code: i64,
    /// What went wrong, in words.
    pub message: String,
}

/// Every error's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ErrorBody {
    /// The kind: `not-supported`, `no-such-pool`, `no-such-group`, `no-such-job`,
    /// `not-found`, `method-not-allowed`, `bad-json`, `bad-request`,
    /// `bad-config`, `unauthorized`, `too-large`, `rejected`, `no-members`,
    /// `lend-timeout`, `unavailable`, `closed`, `timeout`, `crashed`,
    /// `warmup-failed`, `protocol`, `worker-error`, `internal`.
    #[schema(example = "no-such-pool")]
    pub error: String,
    /// What went wrong, in words.
    #[schema(example = "no pool named `x`")]
    pub message: String,
    /// Why a job was rejected (`queue-depth`, `queue-wait`); only with
    /// `rejected`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The worker's last lines of stderr, oldest first, when it wrote any
    /// (`crashed`, `warmup-failed`, `protocol`, `unavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<Vec<String>>,
}

/// A pool's counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PoolStats {
    /// Workers warming up.
    pub starting: usize,
    /// Ready workers no job has.
    pub idle: usize,
    /// Workers a job has.
    pub lent: usize,
    /// Jobs waiting for a worker.
    pub waiting: usize,
    /// The most workers the pool may run.
    pub capacity: usize,
    /// The running slots now.
    pub size: usize,
    /// Ready workers in slots the sizing does not run now.
    pub kept: usize,
    /// Replacements warming above the capacity (`max_surge`) while the
    /// workers they replace keep serving.
    pub surging: usize,
    /// No job waits without a worker starting, idle or lent.
    pub healthy: bool,
}

/// One tenant's jobs in a pool now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TenantLoadBody {
    /// The tenant; `null` for jobs sent with the service's own token.
    pub tenant: Option<String>,
    /// Its jobs waiting for a worker.
    pub waiting: usize,
    /// Its jobs holding workers.
    pub running: usize,
}

/// The answer of `GET /pools/{name}/stats`: the counts and the pool's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PoolStatsBody {
    /// The pool's name.
    pub pool: String,
    /// Workers warming up.
    pub starting: usize,
    /// Ready workers no job has.
    pub idle: usize,
    /// Workers a job has.
    pub lent: usize,
    /// Jobs waiting for a worker.
    pub waiting: usize,
    /// The most workers the pool may run.
    pub capacity: usize,
    /// The running slots now.
    pub size: usize,
    /// Ready workers in slots the sizing does not run now.
    pub kept: usize,
    /// Replacements warming above the capacity (`max_surge`) while the
    /// workers they replace keep serving.
    pub surging: usize,
    /// No job waits without a worker starting, idle or lent.
    pub healthy: bool,
    /// The tenants with jobs waiting or running here now (a tenant's token
    /// sees its own row only).
    pub tenants: Vec<TenantLoadBody>,
}

/// One pool of `GET /pools`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PoolEntryBody {
    /// The pool's name.
    pub name: String,
    /// Its group, if any.
    pub group: Option<String>,
    /// Its counts.
    pub stats: PoolStats,
}

/// The answer of `GET /pools`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PoolList {
    /// Every pool, by name.
    pub pools: Vec<PoolEntryBody>,
}

/// The answer of `PUT /pools/{name}/config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigActions {
    /// The pool's name.
    pub pool: String,
    /// What the change did, in words (`capacity 2 -> 3`, `set sizing`, …).
    pub actions: Vec<String>,
}

/// The answer of `GET /readyz` and `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadyBody {
    /// `ok` when there is a pool and every pool is ready, else
    /// `unavailable`.
    #[schema(example = "ok")]
    pub status: String,
    /// Each pool's word: `ready`, `warming`, `broken`, `closed` or
    /// `queue-down`.
    pub pools: BTreeMap<String, String>,
}

/// The answer of `GET /livez`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LiveBody {
    /// Always `ok`.
    #[schema(example = "ok")]
    pub status: String,
}

/// A pool's live config (the answer of `GET /pools/{name}/config`) and a
/// change of it (the body of `PUT`, where every key is optional: a merge
/// patch). Its properties are made from the keys the service reads:
/// `group`, `sizing`, `eviction`, then each of kennel's options, with its
/// default.
#[derive(Debug)]
pub(crate) struct PoolConfigBody;

impl PartialSchema for PoolConfigBody {
    fn schema() -> RefOr<Schema> {
        let any = || ObjectBuilder::new().schema_type(SchemaType::AnyValue);
        let mut object = ObjectBuilder::new()
            .description(Some(
                "`group`, `sizing` and `eviction` as in a `[[pool]]` of the TOML config, then every option at its key (durations written \"30s\"; `null` for an unset limit). In a `PUT`, a key left out keeps its value and `null` sets an option back to its default.",
            ))
            .property(
                "group",
                ObjectBuilder::new()
                    .schema_type(SchemaType::Array(vec![Type::String, Type::Null]))
                    .description(Some("the pool's group (`null`: none)")),
            )
            .property(
                "sizing",
                any().description(Some(
                    "how many workers run: {\"kind\": \"fixed\", \"workers\": N} or {\"kind\": \"resources\" | \"hill-climbing\" | \"gradient\", \"memory_per_worker\": \"2GiB\"}",
                )),
            )
            .property(
                "eviction",
                any().description(Some(
                    "when idle workers close: {\"kind\": \"none\"} or {\"kind\": \"idle-timeout\", \"after\": \"5m\", \"keep\": 1}",
                )),
            );
        let defaults = serde_json::to_value(Options::default()).unwrap_or(Value::Null);
        if let Value::Object(options) = defaults {
            for (key, default) in options {
                let schema_type = match &default {
                    Value::String(_) => SchemaType::Array(vec![Type::String, Type::Null]),
                    Value::Number(n) if n.is_f64() => {
                        SchemaType::Array(vec![Type::Number, Type::Null])
                    }
                    Value::Number(_) => SchemaType::Array(vec![Type::Integer, Type::Null]),
                    Value::Bool(_) => SchemaType::Type(Type::Boolean),
                    _ => SchemaType::AnyValue,
                };
                object = object.property(
                    key,
                    ObjectBuilder::new()
                        .schema_type(schema_type)
                        .default(Some(default)),
                );
            }
        }
        RefOr::T(Schema::Object(object.build()))
    }
}

impl ToSchema for PoolConfigBody {}
