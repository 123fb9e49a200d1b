//! What an operator reads of a running service, beside the jobs: the status
//! page at `GET /`, a pool's live config and its workers, the OpenAPI
//! description, and the order and help of the Prometheus families.
//!
//! | method and path | does |
//! | --- | --- |
//! | `GET /` | the status page: every pool's counts, its workers, its size over time and the live events ([`page`]) |
//! | `GET /pools/{name}/config` | the live config of a pool, in the shape `PUT` takes ([`config_get`]) |
//! | `GET /pools/{name}/workers` | one row per slot of the pool ([`workers`]) |
//! | `GET /pools`, `GET /pools/{name}/stats`, `PUT /pools/{name}/config` | every pool's counts, one pool's, and a change to a live pool (`pools`) |
//! | `GET /readyz`, `/healthz`, `/livez` | the probes (`probes`) |
//! | `GET /openapi.json` | the OpenAPI 3.1 description of every route ([`openapi`]) |

use axum::Router;
use axum::routing::get;

use crate::state::AppState;

pub(crate) mod config_get;
pub(crate) mod families;
pub(crate) mod openapi;
pub(crate) mod page;
pub(crate) mod pools;
pub(crate) mod probes;
pub(crate) mod workers;

/// The routes of this module but `GET /pools/{name}/config`, which shares
/// its path with the `PUT` of [`app`](crate::app).
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(page::page))
        .route("/pools/{name}/workers", get(workers::pool_workers))
        .route("/openapi.json", get(openapi::serve))
}
