//! An axum integration for library users: lend from a pool inside your own
//! router.
//!
//! Put a [`PoolHandle`] in your router's state (or make it reachable with
//! [`FromRef`]), and take a [`WorkerPool`] in a handler. A router built
//! with [`PoolHandle::none`] has no pool: the extractor then refuses with
//! 501 `not-supported`. [`ApiError`] converts
//! from the pool's and the worker's errors, so `?` gives the service's
//! status codes and JSON bodies.
//!
//! ```no_run
//! use axum::{Json, Router, routing::post};
//! use kennel::{Fixed, Pool};
//! use kennel_process::{Coprocess, CoprocessSpec};
//! use kennel_server::{PoolHandle, WorkerPool};
//! use kennel_server::ApiError;
//! use serde_json::Value;
//!
//! async fn heavy(
//!     WorkerPool(pool): WorkerPool<Coprocess>,
//!     Json(body): Json<Value>,
//! ) -> Result<Json<Value>, ApiError> {
//!     // The outer `?` is the pool's error (rejected, timeout, crashed, …),
//!     // the inner one the worker's (an error reply: 500 with its message).
//!     let reply = pool.run(async |w: &mut Coprocess| w.request(&body).await).await??;
//!     Ok(Json(reply))
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let spec = CoprocessSpec::new(["python3", "examples/workers/echo.py"]);
//! let pool = Pool::builder(move |_| { let spec = spec.clone(); async move { spec.spawn() } })
//!     .sizing(Fixed(2))
//!     .build()?;
//! let app: Router = Router::new()
//!     .route("/heavy", post(heavy))
//!     .with_state(PoolHandle::new(pool));
//! # Ok(()) }
//! ```

use std::fmt;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use kennel::{Pool, Worker};

use crate::error::ApiError;

/// The pool a router lends from, or none. Cheap to clone.
pub struct PoolHandle<W: Worker>(Option<Pool<W>>);

impl<W: Worker> PoolHandle<W> {
    /// A handle on `pool`.
    pub fn new(pool: Pool<W>) -> Self {
        Self(Some(pool))
    }

    /// No pool: handlers that take a [`WorkerPool`] answer 501.
    pub fn none() -> Self {
        Self(None)
    }

    /// The pool.
    ///
    /// # Errors
    ///
    /// [`ApiError::NotSupported`] when there is none.
    pub fn pool(&self) -> Result<&Pool<W>, ApiError> {
        self.0.as_ref().ok_or(ApiError::NotSupported)
    }
}

impl<W: Worker> Clone for PoolHandle<W> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<W: Worker> fmt::Debug for PoolHandle<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PoolHandle").field(&self.0).finish()
    }
}

impl<W: Worker> From<Pool<W>> for PoolHandle<W> {
    fn from(pool: Pool<W>) -> Self {
        Self::new(pool)
    }
}

/// An extractor: the pool of the router's [`PoolHandle`]. Without a pool it
/// rejects the request with 501 `not-supported`.
pub struct WorkerPool<W: Worker>(pub Pool<W>);

impl<W: Worker> fmt::Debug for WorkerPool<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WorkerPool").field(&self.0).finish()
    }
}

impl<S, W> FromRequestParts<S> for WorkerPool<W>
where
    W: Worker,
    PoolHandle<W>: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(_parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        PoolHandle::<W>::from_ref(state)
            .pool()
            .cloned()
            .map(WorkerPool)
    }
}
