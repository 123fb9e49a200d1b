//! The floors of the HTTP bench (`bench/http.sh`): the least an HTTP
//! server can do to run an echo job on a child process. One axum route,
//! `POST /pools/echo/jobs`, on hyper's HTTP/1 with `TCP_NODELAY`, as
//! `kennel serve` runs it, answering the worker's line as
//! `application/json`; no JSON parsing, no middleware, no metrics, no task
//! per job. The route does the job one of three ways:
//!
//! - by default, on one child (the same echo worker) behind a tokio
//!   `Mutex`: write the body and a newline to its stdin, read one line
//!   from its stdout (**the floor**);
//! - with `--pool`, through a kennel pool of one [`Coprocess`], as
//!   `examples/pool_echo.rs` runs it without HTTP (**the floor with the
//!   pool**): what it costs over the floor is the pool's and the
//!   coprocess's part in an HTTP handler, and what `kennel serve` costs
//!   over it is the service's own;
//! - with `--bare`, not at all: the route answers the body it was sent
//!   (**the HTTP exchange alone**), what an HTTP request costs on this
//!   host before any job, the client's part included.
//!
//! It runs on tokio's two-thread runtime, as `kennel serve` does. With
//! `--current-thread` first, it runs on a current-thread runtime instead:
//! hyper's connection task wakes itself while it takes a request's body,
//! which on the two-thread runtime wakes the idle thread (two `futex`
//! calls a request) and on one thread wakes nothing. `kennel serve` avoids
//! that wake-up on its own (its connections poll themselves again in the
//! same turn).
//!
//! ```text
//! cargo run --release -p kennel-bench --example http_floor -- [--current-thread] [--pool|--bare] WORKER [ADDR]
//! ```
//!
//! It prints `floor listening on http://ADDR` once the worker is ready
//! (with `--bare`, at once: no worker is started), and runs until it is
//! killed.

use std::process::Stdio;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use kennel_process::{Coprocess, CoprocessSpec, JsonBytes};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::Mutex;

struct Child {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
    /// Held for as long as the route: dropped, it kills the child.
    _process: tokio::process::Child,
}

/// The reply as the answer.
fn answer(reply: &[u8]) -> impl IntoResponse + use<> {
    let reply = Bytes::copy_from_slice(reply);
    ([(header::CONTENT_TYPE, "application/json")], reply)
}

async fn job(State(child): State<Arc<Mutex<Child>>>, body: Bytes) -> impl IntoResponse {
    let mut child = child.lock().await;
    let child = &mut *child;
    child
        .stdin
        .write_all(&body)
        .await
        .expect("the worker reads");
    child
        .stdin
        .write_all(b"\n")
        .await
        .expect("the worker reads");
    child.stdin.flush().await.expect("the worker reads");
    child.line.clear();
    child
        .stdout
        .read_until(b'\n', &mut child.line)
        .await
        .expect("the worker writes");
    answer(child.line.trim_ascii_end())
}

async fn pool_job(
    State(pool): State<Arc<kennel::Pool<Coprocess>>>,
    body: Bytes,
) -> impl IntoResponse {
    let request = JsonBytes::new(body).expect("the bench posts JSON");
    let reply = pool
        .run(async |w: &mut Coprocess| w.request_bytes(&request, None).await)
        .await
        .expect("a worker is lent")
        .expect("the worker echoes");
    answer(reply.as_bytes())
}

/// The floor's route, on one child behind a mutex.
async fn child_route(worker: String) -> std::io::Result<Router> {
    let mut process = tokio::process::Command::new(worker)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let stdin = process.stdin.take().expect("piped");
    let mut stdout = BufReader::new(process.stdout.take().expect("piped"));
    let mut ready = Vec::new();
    stdout.read_until(b'\n', &mut ready).await?;
    let child = Arc::new(Mutex::new(Child {
        stdin,
        stdout,
        line: Vec::with_capacity(1024),
        _process: process,
    }));
    Ok(Router::new()
        .route("/pools/echo/jobs", post(job))
        .with_state(child))
}

/// How the route does the job (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// On one child behind a mutex: the floor.
    Child,
    /// Through a kennel pool: the floor with the pool (`--pool`).
    Pool,
    /// Not at all: the HTTP exchange alone (`--bare`).
    Bare,
}

fn main() -> std::io::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = if args.first().is_some_and(|a| a == "--current-thread") {
        args.remove(0);
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
    };
    runtime.block_on(serve(args))
}

async fn serve(mut args: Vec<String>) -> std::io::Result<()> {
    let mode = match args.first().map(String::as_str) {
        Some("--pool") => Mode::Pool,
        Some("--bare") => Mode::Bare,
        _ => Mode::Child,
    };
    if mode != Mode::Child {
        args.remove(0);
    }
    let mut args = args.into_iter();
    let worker = args
        .next()
        .expect("usage: http_floor [--current-thread] [--pool|--bare] WORKER [ADDR]");
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:0".to_owned());
    let router = match mode {
        Mode::Child => child_route(worker).await?,
        Mode::Pool => {
            let pool = kennel_bench::echo_pool(CoprocessSpec::new([worker])).await;
            Router::new()
                .route("/pools/echo/jobs", post(pool_job))
                .with_state(Arc::new(pool))
        }
        Mode::Bare => {
            Router::new().route("/pools/echo/jobs", post(async |body: Bytes| answer(&body)))
        }
    };
    let listener = TcpListener::bind(addr).await?;
    println!("floor listening on http://{}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
