//! The second floor of the HTTP bench (`bench/http.sh`): the floor's
//! route (`examples/http_floor.rs`: one axum route on hyper's HTTP/1, no
//! middleware, no metrics) with the job run through a kennel pool of one
//! [`Coprocess`], as `examples/pool_echo.rs` runs it without HTTP. What it
//! costs over the floor is the pool's and the coprocess's part in an HTTP
//! handler; what `kennel serve` costs over it is the service's own.
//!
//! ```text
//! cargo run --release -p kennel-bench --example http_floor_pool -- WORKER [ADDR]
//! ```
//!
//! It prints `floor listening on http://ADDR` once the worker is ready,
//! and runs until it is killed.
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
use tokio::net::TcpListener;

async fn job(State(pool): State<Arc<kennel::Pool<Coprocess>>>, body: Bytes) -> impl IntoResponse {
    let request = JsonBytes::new(body).expect("the bench posts JSON");
    let reply = pool
        .run(async |w: &mut Coprocess| w.request_bytes(&request, None).await)
        .await
        .expect("a worker is lent")
        .expect("the worker echoes");
    let reply = Bytes::copy_from_slice(reply.as_bytes());
    ([(header::CONTENT_TYPE, "application/json")], reply)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let worker = args.next().expect("usage: http_floor_pool WORKER [ADDR]");
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:0".to_owned());
    let pool = Arc::new(kennel_bench::echo_pool(CoprocessSpec::new([worker])).await);
    let router = Router::new()
        .route("/pools/echo/jobs", post(job))
        .with_state(pool);
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
