//! `GET /pools/{name}/workers`: one row per slot of a pool
//! ([`kennel::Pool::workers`]; docs/SERVICE.md, "A pool's workers").

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use kennel::{RetireDue, WorkerRow};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::ops::openapi::ErrorBody;
use crate::segment::Segment;
use crate::state::AppState;

/// The answer of `GET /pools/{name}/workers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkersBody {
    /// The pool's name.
    pub pool: String,
    /// One row per slot, slot 0 first.
    pub workers: Vec<WorkerJson>,
}

/// One slot and its worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkerJson {
    /// The slot.
    pub slot: usize,
    /// What the slot holds: `empty`, `backing-off`, `evicted`, `starting`,
    /// `idle`, `kept`, `lent`, `probing` or `closing`.
    #[schema(example = "idle")]
    pub state: String,
    /// Grows with each worker the slot starts.
    pub generation: u64,
    /// The worker's process id.
    pub pid: Option<u32>,
    /// How long the worker has run, from the start of its warm-up, in
    /// milliseconds.
    pub running_for_ms: Option<f64>,
    /// How long its warm-up took, in milliseconds, once it was ready.
    pub ready_after_ms: Option<f64>,
    /// Jobs it has served.
    pub jobs: u64,
    /// How long its last job held it, in milliseconds.
    pub last_job_ms: Option<f64>,
    /// Early exits in a row of this slot's workers (its back-off count).
    pub early_exits: u32,
    /// Its memory when last sampled (with `max_memory`), in bytes.
    pub memory_bytes: Option<u64>,
    /// How it used the CPU threads it was given over its first second of
    /// jobs, once measured (workers with a thread budget).
    #[serde(default)]
    pub threads: Option<ThreadsJson>,
    /// When the pool will retire it itself, and why.
    pub retire_due: Option<RetireDueJson>,
    /// What the worker said of itself when it became ready (for a process
    /// worker, the fields of its ready line besides `ready`, such as a
    /// model's version), as JSON.
    #[schema(value_type = Object)]
    pub about: Option<serde_json::Value>,
    /// The keys it holds, loaded or loading (jobs that carry one of them
    /// come to it); empty in a pool whose jobs carry no key.
    #[serde(default)]
    pub keys: Vec<String>,
    /// The GPU it was placed on, in a pool with `gpus_per_worker` (absent
    /// elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuJson>,
}

/// A worker's GPU: the device (its `KENNEL_GPU` and `CUDA_VISIBLE_DEVICES`)
/// and the memory its processes hold there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GpuJson {
    /// The device's id: the driver's index, or `index:instance` for a MIG
    /// instance.
    #[schema(example = "0")]
    pub id: String,
    /// Its UUID.
    pub uuid: String,
    /// The bytes the worker's processes hold on it, as last sampled (every
    /// `memory_check_every`); `null` until then, or where the driver does
    /// not tell.
    pub memory_bytes: Option<u64>,
}

impl From<&kennel::GpuUse> for GpuJson {
    fn from(gpu: &kennel::GpuUse) -> Self {
        Self {
            id: gpu.place.id.clone(),
            uuid: gpu.place.uuid.clone(),
            memory_bytes: gpu.memory,
        }
    }
}

/// How a worker used the CPU threads it was given over its first second
/// of jobs, measured from `/proc`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThreadsJson {
    /// The threads it was given (`KENNEL_THREADS`).
    pub budget: usize,
    /// The threads its processes ran.
    pub threads: usize,
    /// Of them, those that worked during its jobs (each at least 5% of the
    /// job time).
    pub working: usize,
    /// CPU seconds per second of job time: the cores its jobs kept busy.
    pub cores: f64,
    /// More than twice its budget of threads worked: it and its neighbours
    /// fight over the cores (a `worker:oversubscribed` event said so).
    pub oversubscribed: bool,
    /// What to do about it, when it is oversubscribed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl From<&kennel::ThreadUse> for ThreadsJson {
    fn from(usage: &kennel::ThreadUse) -> Self {
        Self {
            budget: usage.budget,
            threads: usage.threads,
            working: usage.working,
            cores: (usage.cores * 100.0).round() / 100.0,
            oversubscribed: usage.oversubscribed(),
            fix: usage
                .oversubscribed()
                .then(|| kennel::ThreadUse::FIX.to_owned()),
        }
    }
}

/// A retirement the pool has scheduled for a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetireDueJson {
    /// Why: `lifetime` or `max-jobs`.
    #[schema(example = "lifetime")]
    pub reason: String,
    /// The time left, for a lifetime, in milliseconds.
    pub in_ms: Option<f64>,
    /// The jobs left, for `max_jobs`.
    pub jobs_left: Option<u64>,
}

fn ms(d: Duration) -> f64 {
    // Tenths of a millisecond, as the events write them.
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}

impl From<&RetireDue> for RetireDueJson {
    fn from(due: &RetireDue) -> Self {
        Self {
            reason: due.reason.as_str().to_owned(),
            in_ms: due.in_time.map(ms),
            jobs_left: due.jobs_left,
        }
    }
}

impl From<&WorkerRow> for WorkerJson {
    fn from(row: &WorkerRow) -> Self {
        Self {
            slot: row.slot,
            state: row.state.as_str().to_owned(),
            generation: row.generation,
            pid: row.pid,
            running_for_ms: row.running_for.map(ms),
            ready_after_ms: row.ready_after.map(ms),
            jobs: row.jobs,
            last_job_ms: row.last_job.map(ms),
            early_exits: row.early_exits,
            memory_bytes: row.memory,
            threads: row.threads.as_ref().map(Into::into),
            gpu: row.gpu.as_ref().map(Into::into),
            retire_due: row.retire_due.as_ref().map(Into::into),
            // The library keeps it as the text of a JSON object; a text that
            // is not JSON is shown as a string rather than lost.
            about: row.about.as_deref().map(|text| {
                serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::from(text))
            }),
            keys: row.keys.iter().map(|k| k.as_str().to_owned()).collect(),
        }
    }
}

/// One row per slot of a pool.
#[utoipa::path(
    get,
    path = "/pools/{name}/workers",
    tag = "pools",
    params(("name" = String, Path, description = "the pool's name")),
    responses(
        (status = 200, description = "one row per slot", body = WorkersBody),
        (status = 404, description = "no pool of this name (`no-such-pool`)", body = ErrorBody),
        (status = 501, description = "no pool is configured (`not-supported`)", body = ErrorBody),
    )
)]
pub(crate) async fn pool_workers(
    State(state): State<AppState>,
    Segment(pool): Segment,
) -> Result<Json<WorkersBody>, ApiError> {
    let rows = crate::jobs::pool_named(&state, &pool)?.workers();
    let workers = rows.iter().map(WorkerJson::from).collect();
    Ok(Json(WorkersBody { pool, workers }))
}
