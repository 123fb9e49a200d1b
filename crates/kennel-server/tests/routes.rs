//! `Routes` (what `kennel serve` answers with) takes the job route without
//! the router: the same requests get the same answers from it as from the
//! router alone (`app`), and are counted under the same route label.

mod routed;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use kennel_server::http::Routes;
use kennel_server::{AppState, app};
use tower::{Service, ServiceExt};

use routed::{demo, start, state_with};

const LIMIT: Duration = Duration::from_secs(30);

/// One request: method, path, extra headers, body.
type Case = (
    Method,
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
);

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
    let (method, uri, headers, body) = case;
    let mut request = Request::builder().method(method.clone()).uri(*uri);
    if !headers.iter().any(|(name, _)| *name == "content-type") {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    for (name, value) in *headers {
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
async fn alike(state: &AppState, cases: &[(Case, StatusCode)]) {
    let (routes, router) = (Routes::new(state.clone()), app(state.clone()));
    for (case, want) in cases {
        let by_routes = answer(routes.clone(), case).await;
        let by_router = answer(router.clone(), case).await;
        assert_eq!(by_routes, by_router, "{case:?}");
        assert_eq!(by_routes.0, *want, "{case:?}: {}", by_routes.2);
    }
}

/// A `POST` of `body` to `path` with `headers`.
fn post(
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
) -> Case {
    (Method::POST, path, headers, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_route_answers_as_through_the_router() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let jobs = "/pools/demo/jobs";
    alike(
        &state,
        &[
            (post(jobs, &[], r#"{"iterations": 5}"#), StatusCode::OK),
            // A name that needs decoding goes through the router.
            (post("/pools/d%65mo/jobs", &[], "{}"), StatusCode::OK),
            (post("/pools/nope/jobs", &[], "{}"), StatusCode::NOT_FOUND),
            (post(jobs, &[], "{not json"), StatusCode::BAD_REQUEST),
            (
                post(jobs, &[], r#"{"crash": true}"#),
                StatusCode::BAD_GATEWAY,
            ),
            (post("/pools/demo/jobs/", &[], "{}"), StatusCode::NOT_FOUND),
            (post("/pools//jobs", &[], "{}"), StatusCode::NOT_FOUND),
            (post("/pools/demo/x/jobs", &[], "{}"), StatusCode::NOT_FOUND),
            ((Method::GET, jobs, &[], ""), StatusCode::METHOD_NOT_ALLOWED),
            // A binary body, and a form without its boundary.
            (
                post(
                    jobs,
                    &[("content-type", "application/octet-stream")],
                    "\u{1}\u{2}",
                ),
                StatusCode::OK,
            ),
            (
                post(jobs, &[("content-type", "multipart/form-data")], "x"),
                StatusCode::BAD_REQUEST,
            ),
            (
                post(jobs, &[("host", "evil.example")], "{}"),
                StatusCode::FORBIDDEN,
            ),
            (
                post(jobs, &[("origin", "https://evil.example")], "{}"),
                StatusCode::FORBIDDEN,
            ),
        ],
    )
    .await;
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_route_asks_for_the_token_as_through_the_router() {
    let state = AppState::builder().token("s3cret").build();
    start(&state, vec![demo("demo", 1)]).await;
    let jobs = "/pools/demo/jobs";
    alike(
        &state,
        &[
            (post(jobs, &[], "{}"), StatusCode::UNAUTHORIZED),
            (
                post(jobs, &[("authorization", "Bearer s3cres")], "{}"),
                StatusCode::UNAUTHORIZED,
            ),
            (
                post(jobs, &[("authorization", "Bearer s3cret")], "{}"),
                StatusCode::OK,
            ),
        ],
    )
    .await;
    state.close().await;
}

/// The `kennel_http_requests_total` samples of the job route with `status`.
async fn jobs_counted(routes: &Routes, status: u16) -> f64 {
    let scrape = Request::get("/metrics").body(Body::empty()).unwrap();
    let response = routes.clone().oneshot(scrape).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let status = format!("status=\"{status}\"");
    String::from_utf8(body.to_vec())
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("kennel_http_requests_total{"))
        .filter(|l| l.contains("route=\"/pools/{name}/jobs\"") && l.contains(&status))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_taken_without_the_router_is_counted_under_its_route() {
    let state = state_with(vec![demo("counted", 1)]).await;
    let routes = Routes::new(state.clone());
    let before = jobs_counted(&routes, 200).await;
    let job = Request::post("/pools/counted/jobs")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(
        routes.clone().oneshot(job).await.unwrap().status(),
        StatusCode::OK
    );
    // Counters only grow; other tests of this process may add to them.
    assert!(jobs_counted(&routes, 200).await >= before + 1.0);
    state.close().await;
}
