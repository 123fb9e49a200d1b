//! The service `kennel serve` answers with: the route of jobs,
//! `POST /pools/{name}/jobs`, taken without the router, and every other
//! request through the router ([`crate::app`]).
//!
//! A job is what the service exists for, and the router costs every request
//! it routes a few boxed services and futures, a path match and two request
//! extensions; the job route, found by a prefix and a suffix, costs none of
//! them. The request passes the same checks (`Front`), with the same
//! route label, and runs the same handler as through the router; a path
//! that would need percent-decoding goes through the router.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::Response;
use axum::routing::future::RouteFuture;
use futures_util::future::BoxFuture;
use futures_util::future::Either;
use pin_project_lite::pin_project;
use tower::Service;

use super::front::{Front, FrontFuture};
use crate::segment::Segment;
use crate::state::AppState;

/// The route label (and router pattern) of the job route.
pub(crate) const JOBS: &str = "/pools/{name}/jobs";

/// Every route of the service, the job route first: what
/// [`serve`](super::serve) answers with in `kennel serve`.
#[derive(Clone)]
pub struct Routes {
    jobs: Front<JobRoute>,
    router: Router,
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes").finish_non_exhaustive()
    }
}

impl Routes {
    /// The routes of [`app`](crate::app) over `state`, the job route taken
    /// without the router.
    pub fn new(state: AppState) -> Self {
        Self {
            jobs: Front::new(state.clone(), JobRoute(state.clone())),
            router: crate::app(state),
        }
    }
}

impl<B> Service<axum::http::Request<B>> for Routes
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = RoutesFuture;

    /// Always ready, as both of its services are: the job route holds no
    /// resource, and axum's `Router` is always ready.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        if request.method() == Method::POST && job_pool(request.uri().path()).is_some() {
            let answer = self.jobs.call_on(request.map(Body::new), JOBS);
            RoutesFuture {
                answer: Either::Left(answer),
            }
        } else {
            RoutesFuture {
                answer: Either::Right(self.router.call(request)),
            }
        }
    }
}

pin_project! {
    /// The answer of [`Routes`]: the job route's or the router's.
    pub struct RoutesFuture {
        #[pin]
        answer: Either<FrontFuture<BoxFuture<'static, Result<Response, Infallible>>>, RouteFuture<Infallible>>,
    }
}

impl Future for RoutesFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().answer.poll(cx)
    }
}

impl std::fmt::Debug for RoutesFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutesFuture").finish_non_exhaustive()
    }
}

/// The pool named by a job route's path, `/pools/{name}/jobs`, when its
/// name needs no decoding.
fn job_pool(path: &str) -> Option<&str> {
    let name = path.strip_prefix("/pools/")?.strip_suffix("/jobs")?;
    (!name.is_empty() && !name.contains(['/', '%'])).then_some(name)
}

/// The job route's handler, as a service.
#[derive(Clone)]
pub(crate) struct JobRoute(AppState);

impl Service<Request> for JobRoute {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    /// The pool's name is found again in the path (two comparisons) rather
    /// than carried from [`Routes`]: an owned copy is needed either way, as
    /// a streamed answer outlives the request.
    fn call(&mut self, request: Request) -> Self::Future {
        let name = job_pool(request.uri().path())
            .unwrap_or_default()
            .to_owned();
        let state = self.0.clone();
        Box::pin(
            async move { Ok(crate::app::pool_job(State(state), Segment(name), request).await) },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::job_pool;

    #[test]
    fn a_job_path_names_its_pool_when_the_name_needs_no_decoding() {
        assert_eq!(job_pool("/pools/echo/jobs"), Some("echo"));
        assert_eq!(job_pool("/pools/a.b-c_d/jobs"), Some("a.b-c_d"));
        for path in [
            "/pools//jobs",
            "/pools/a%20b/jobs",
            "/pools/a/b/jobs",
            "/pools/a/jobs/",
            "/pools/a/job",
            "/groups/a/jobs",
            "/pools/jobs",
        ] {
            assert_eq!(job_pool(path), None, "{path}");
        }
    }
}
