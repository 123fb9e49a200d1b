//! `GET /pools/{name}/config`: the live config of a pool, in the shape
//! `PUT /pools/{name}/config` takes, so that what one prints the other
//! takes back unchanged: `group`, `sizing`, `eviction` and every option of
//! [`kennel::Options`], in alphabetical order, written as a config writes
//! them (docs/SERVICE.md, "A pool's live config"). A pool added to the
//! state by hand shows `null` sizing and eviction, which `PUT` reads as
//! "keep".

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::ops::openapi::{ErrorBody, PoolConfigBody};
use crate::segment::Segment;
use crate::state::AppState;

/// The live config of pool `name`, as a JSON object `PUT` takes.
///
/// # Errors
///
/// [`ApiError::NoSuchPool`], or [`ApiError::NotSupported`] when no pool is
/// configured.
pub(crate) fn live_config(state: &AppState, name: &str) -> Result<Value, ApiError> {
    let pool = crate::jobs::pool_named(state, name)?;
    // One snapshot: no change may land between the options and the policies.
    let _one_at_a_time = state.reconfig_lock();
    let (group, policies) = state
        .pools()
        .with(name, |e| (e.group.clone(), e.policies))
        .unwrap_or_default();
    let sizing = policies.map(|p| p.sizing);
    let eviction = policies.map(|p| p.eviction);
    let mut body = json!({ "group": group, "sizing": sizing, "eviction": eviction });
    if let (Value::Object(body), Value::Object(options)) = (&mut body, to_json(&pool.options())) {
        body.extend(options);
    }
    Ok(body)
}

fn to_json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| {
        tracing::error!(target: "kennel_server", error = %e, "a live config does not write as JSON");
        Value::Null
    })
}

/// The live config of a pool, in the shape `PUT` takes.
#[utoipa::path(
    get,
    path = "/pools/{name}/config",
    tag = "pools",
    params(("name" = String, Path, description = "the pool's name")),
    responses(
        (status = 200, description = "the live config: `group`, `sizing`, `eviction`, then every option at its key", body = PoolConfigBody),
        (status = 404, description = "no pool of this name (`no-such-pool`)", body = ErrorBody),
        (status = 501, description = "no pool is configured (`not-supported`)", body = ErrorBody),
    )
)]
pub(crate) async fn pool_config_get(
    State(state): State<AppState>,
    Segment(name): Segment,
) -> Result<Json<Value>, ApiError> {
    live_config(&state, &name).map(Json)
}
