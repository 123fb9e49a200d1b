//! `Routes` (what `kennel serve` answers with) takes the job route without
//! the router: the same requests get the same answers from it as from the
//! router alone (`app`), and are counted under the same route label.

mod routed;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use kennel_server::http::Routes;
use kennel_server::{AppState, app};
use tower::{Service, ServiceExt};

use routed::{demo, requests_counted, start, state_with};

const LIMIT: Duration = Duration::from_secs(30);

/// One request: method, path, a header besides `Content-Type:
/// application/json` (or instead of it), body.
type Case = (
    Method,
    &'static str,
    Option<(&'static str, &'static str)>,
    &'static str,
);

/// The path of the job route to the pool the tests start.
const JOBS: &str = "/pools/demo/jobs";

/// A job with `body`.
fn job(body: &'static str) -> Case {
    (Method::POST, JOBS, None, body)
}

/// A job with `body` and the header `name: value`.
fn job_with(name: &'static str, value: &'static str, body: &'static str) -> Case {
    (Method::POST, JOBS, Some((name, value)), body)
}

/// A `POST` of `body` to `path`.
fn post_to(path: &'static str, body: &'static str) -> Case {
    (Method::POST, path, None, body)
}

/// What is compared of an answer: status, content type, body (as
/// [`without_counters`]).
async fn answer<S>(service: S, case: &Case) -> (StatusCode, String, String)
where
    S: Service<
            Request<Body>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        >,
{
    let (method, uri, extra, body) = case;
    let mut request = Request::builder().method(method.clone()).uri(*uri);
    if !extra.is_some_and(|(name, _)| name == "content-type") {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    if let Some((name, value)) = extra {
        request = request.header(*name, *value);
    }
    let request = request.body(Body::from(*body)).unwrap();
    let response = tokio::time::timeout(LIMIT, service.oneshot(request))
        .await
        .expect("the request took too long")
        .unwrap();
    let (status, kind, body) = routed::read_answer(response, LIMIT).await;
    (status, kind, without_counters(&body))
}

/// The body with each run of digits as `#`: what differs from one job to
/// the next (the demo worker's job count, time and process id, in its
/// reply and its last words) does not count.
fn without_counters(body: &[u8]) -> String {
    let mut text = String::new();
    for c in String::from_utf8_lossy(body).chars() {
        if !c.is_ascii_digit() {
            text.push(c);
        } else if !text.ends_with('#') {
            text.push('#');
        }
    }
    text
}

/// Asserts that `Routes` and the router answer every case alike, and that
/// each case's status is `want`.
async fn alike(state: &AppState, cases: &[(Case, u16)]) {
    let (routes, router) = (Routes::new(state.clone()), app(state.clone()));
    for (case, want) in cases {
        let by_routes = answer(routes.clone(), case).await;
        let by_router = answer(router.clone(), case).await;
        assert_eq!(by_routes, by_router, "{case:?}");
        assert_eq!(by_routes.0.as_u16(), *want, "{case:?}: {}", by_routes.2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_route_answers_as_through_the_router() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let (binary, form) = ("application/octet-stream", "multipart/form-data");
    alike(
        &state,
        &[
            (job(r#"{"iterations": 5}"#), 200),
            // A name that needs decoding goes through the router.
            (post_to("/pools/d%65mo/jobs", "{}"), 200),
            (post_to("/pools/nope/jobs", "{}"), 404),
            (job("{not json"), 400),
            (job(r#"{"crash": true}"#), 502),
            (post_to("/pools/demo/jobs/", "{}"), 404),
            (post_to("/pools//jobs", "{}"), 404),
            (post_to("/pools/demo/x/jobs", "{}"), 404),
            ((Method::GET, JOBS, None, ""), 405),
            // A binary body, and a form without its boundary.
            (job_with("content-type", binary, "\u{1}\u{2}"), 200),
            (job_with("content-type", form, "x"), 400),
            (job_with("host", "evil.example", "{}"), 403),
            (job_with("origin", "https://evil.example", "{}"), 403),
        ],
    )
    .await;
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_route_asks_for_the_token_as_through_the_router() {
    let state = AppState::builder().token("s3cret").build();
    start(&state, vec![demo("demo", 1)]).await;
    let (wrong, right) = ("Bearer s3cres", "Bearer s3cret");
    alike(
        &state,
        &[
            (job("{}"), 401),
            (job_with("authorization", wrong, "{}"), 401),
            (job_with("authorization", right, "{}"), 200),
        ],
    )
    .await;
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_taken_without_the_router_is_counted_under_its_route() {
    let state = state_with(vec![demo("counted", 1)]).await;
    let routes = Routes::new(state.clone());
    let before = requests_counted(&routes, "/pools/{name}/jobs", 200, None).await;
    let job = Request::post("/pools/counted/jobs")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(
        routes.clone().oneshot(job).await.unwrap().status(),
        StatusCode::OK
    );
    // Counters only grow; other tests of this process may add to them.
    assert!(requests_counted(&routes, "/pools/{name}/jobs", 200, None).await >= before + 1.0);
    state.close().await;
}
