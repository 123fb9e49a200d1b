//! `GET /`: the status page, one HTML file embedded in the binary
//! (`assets/status.html`, style and script inline; docs/SERVICE.md, "The
//! status page"). The page holds no data, so it is served without the
//! bearer token; its script asks for the token on a 401 and sends it with
//! each of its requests.

use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

/// The page's path.
pub(crate) const PATH: &str = "/";

/// The page, as served.
pub(crate) const HTML: &str = include_str!("../../assets/status.html");

/// What the page may load: its own inline style and script, and requests
/// to the service that served it; nothing else, and no framing.
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                   connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// The status page.
#[utoipa::path(
    get,
    path = "/",
    tag = "operators",
    responses((status = 200, description = "the status page (HTML); it asks for no token, its requests do", content_type = "text/html"))
)]
pub(crate) async fn page() -> Response {
    (
        [
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        Html(HTML),
    )
        .into_response()
}
