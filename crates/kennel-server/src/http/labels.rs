//! The labels of the HTTP metrics, from closed sets: a request can choose
//! its method and path freely, but never the number of series it creates.
//!
//! - `method`: one of the nine methods of RFC 9110 (and `PATCH`), else
//!   `other`;
//! - `route`: the route's pattern as written in the router
//!   (`/pools/{name}/jobs`), or `unmatched` for every path no route took;
//! - `status`: the status code, which the service itself chooses.

use axum::extract::MatchedPath;
use axum::http::{Method, Request};

/// The `route` label of a request no route matched.
pub(crate) const UNMATCHED: &str = "unmatched";

/// The `method` label of a method outside the known set.
pub(crate) const OTHER_METHOD: &str = "other";

/// The `method` label of `method`: its name when it is one of the standard
/// methods, else [`OTHER_METHOD`].
pub(crate) fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => OTHER_METHOD,
    }
}

/// The `route` label of `request`: the pattern of the route that matched
/// (one per route of the router), else [`UNMATCHED`].
pub(crate) fn route_label<B>(request: &Request<B>) -> String {
    request
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNMATCHED, MatchedPath::as_str)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_share_one_label() {
        for m in ["FOO", "get", "X-1", "PROPFIND"] {
            let method = Method::from_bytes(m.as_bytes()).unwrap();
            assert_eq!(method_label(&method), OTHER_METHOD, "{m}");
        }
        assert_eq!(method_label(&Method::POST), "POST");
    }

    #[test]
    fn a_path_no_route_took_is_unmatched() {
        let request = Request::builder().uri("/x/y/z").body(()).unwrap();
        assert_eq!(route_label(&request), UNMATCHED);
    }

    #[tokio::test]
    async fn a_matched_route_is_labelled_by_its_pattern() {
        use axum::body::Body;
        use tower::ServiceExt;

        let app = axum::Router::new().route(
            "/pools/{name}/jobs",
            axum::routing::post(async |request: Request<Body>| route_label(&request)),
        );
        for name in ["a", "b"] {
            let request = Request::post(format!("/pools/{name}/jobs"))
                .body(Body::empty())
                .unwrap();
            let response = app.clone().oneshot(request).await.unwrap();
            let body = axum::body::to_bytes(response.into_body(), 1024)
                .await
                .unwrap();
            assert_eq!(&body[..], b"/pools/{name}/jobs");
        }
    }
}
