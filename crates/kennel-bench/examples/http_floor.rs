//! The floor of the HTTP bench (`bench/http.sh`): the least an HTTP
//! server can do to run an echo job on a child process. One axum route,
//! `POST /pools/echo/jobs`, on hyper's HTTP/1 with `TCP_NODELAY`, as
//! `kennel serve` runs it; one child (the same echo worker) behind a tokio
//! `Mutex`: write the body and a newline to its stdin, read one line from
//! its stdout, answer it as `application/json`. No pool, no JSON parsing,
//! no middleware, no metrics, no task per job.
//!
//! ```text
//! cargo run --release -p kennel-bench --example http_floor -- WORKER [ADDR]
//! ```
//!
//! It prints `floor listening on http://ADDR` once the worker is ready,
//! and runs until it is killed.

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
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::Mutex;

struct Child {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
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
    let reply = Bytes::copy_from_slice(child.line.trim_ascii_end());
    ([(header::CONTENT_TYPE, "application/json")], reply)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let worker = args.next().expect("usage: http_floor WORKER [ADDR]");
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:0".to_owned());
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
    }));
    let router = Router::new()
        .route("/pools/echo/jobs", post(job))
        .with_state(child);
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
