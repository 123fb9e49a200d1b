//! A path segment (a pool or group name) whose refusal is answered as JSON,
//! as every other error: axum's own `Path` answers a segment that is not
//! UTF-8 with a plain-text 400.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

use crate::error::ApiError;

/// The one segment a route captures (`/pools/{name}/…`).
#[derive(Debug)]
pub(crate) struct Segment(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for Segment {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(segment)) => Ok(Self(segment)),
            Err(e) => Err(ApiError::BadRequest {
                message: format!("the path is not understood: {}", e.body_text()),
            }),
        }
    }
}
