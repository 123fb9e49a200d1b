//! Over real TCP: a body over the limit is 413; slow and stalled bodies,
//! stalled header sends and a header flood hold no worker and keep no other
//! request waiting.

use std::time::{Duration, Instant};

use kennel_server::{AppState, app};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{LIMIT, state_with};

struct Served {
    addr: std::net::SocketAddr,
    state: AppState,
    server: tokio::task::JoinHandle<()>,
}

async fn serve(builder: kennel_server::AppStateBuilder) -> Served {
    let state = state_with(builder).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = app(state.clone());
    let server = tokio::spawn(async move {
        let options = kennel_server::ConnOptions::default();
        let _ = kennel_server::serve(listener, router, options, std::future::pending()).await;
    });
    Served {
        addr,
        state,
        server,
    }
}

impl Served {
    async fn stop(self) {
        self.server.abort();
        self.state.close().await;
    }
}

/// One request with `Connection: close`; returns the status and the body.
async fn http(addr: std::net::SocketAddr, head_and_body: &[u8]) -> (u16, String) {
    let exchange = async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        // The server may answer and close before all is sent (413, 431).
        let _ = s.write_all(head_and_body).await;
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw).await;
        raw
    };
    let raw = tokio::time::timeout(LIMIT, exchange)
        .await
        .expect("an answer in time");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    (status, body)
}

fn post_job(addr: std::net::SocketAddr, body: &str) -> Vec<u8> {
    format!(
        "POST /pools/echo/jobs HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A normal job answers within `d` while the server is under attack.
async fn a_job_answers_within(addr: std::net::SocketAddr, d: Duration) {
    let started = Instant::now();
    let (status, body) = http(addr, &post_job(addr, "{\"ping\":1}")).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        started.elapsed() < d,
        "a job took {:?} under attack",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_413_and_the_server_goes_on() {
    let served = serve(AppState::builder().body_limit(1024)).await;
    let addr = served.addr;
    // Declared too large.
    let mut req = format!(
        "POST /pools/echo/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        4 << 20
    )
    .into_bytes();
    req.extend(std::iter::repeat_n(b' ', 64 * 1024));
    let (status, body) = http(addr, &req).await;
    assert_eq!(status, 413, "{body}");
    // Chunked, with no length, past the limit.
    let mut req =
        b"POST /pools/echo/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for _ in 0..8 {
        req.extend_from_slice(b"200\r\n");
        req.extend(std::iter::repeat_n(b'1', 0x200));
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let (status, body) = http(addr, &req).await;
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("too-large"), "{body}");
    a_job_answers_within(addr, Duration::from_secs(5)).await;
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_stalled_bodies_hold_no_worker_and_block_no_one() {
    let served = serve(AppState::builder()).await;
    let addr = served.addr;
    let pool = served.state.pool("echo").unwrap();

    // Twenty clients drip a 40-byte body, a byte every 10 ms.
    let body = "{\"slow\":\"abcdefghijklmnopqrstuvwxyz0\"}";
    let head = format!(
        "POST /pools/echo/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut slow = Vec::new();
    for _ in 0..20 {
        let (head, body) = (head.clone(), body.to_owned());
        slow.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(head.as_bytes()).await.unwrap();
            for b in body.bytes() {
                s.write_all(&[b]).await.unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let mut raw = Vec::new();
            tokio::time::timeout(LIMIT, s.read_to_end(&mut raw))
                .await
                .expect("an answer")
                .unwrap();
            String::from_utf8_lossy(&raw).into_owned()
        }));
    }
    // Fifty more send half a body and stall.
    let mut stalled = Vec::new();
    for _ in 0..50 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(
            b"POST /pools/echo/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"half\":",
        )
        .await
        .unwrap();
        stalled.push(s);
    }
    // Meanwhile jobs answer at once, and no worker is held by a body.
    for _ in 0..5 {
        a_job_answers_within(addr, Duration::from_secs(2)).await;
        let s = pool.stats();
        assert_eq!((s.lent, s.waiting), (0, 0), "{s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The slow bodies end at about the same moment: each is then a job like
    // any other, answered, or turned away by the bounded queue when they
    // arrive together faster than the workers take them.
    let mut answered = 0;
    for s in slow {
        let answer = s.await.unwrap();
        if answer.starts_with("HTTP/1.1 200") {
            assert!(answer.contains("abcdefghijklmnopqrstuvwxyz0"), "{answer}");
            answered += 1;
        } else {
            assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
            assert!(answer.contains("queue-depth"), "{answer}");
        }
    }
    assert!(answered > 0, "no slow body was ever answered");
    // The stalled clients go away; nothing is left behind.
    drop(stalled);
    a_job_answers_within(addr, Duration::from_secs(2)).await;
    let s = pool.stats();
    assert_eq!((s.lent, s.waiting), (0, 0), "{s:?}");
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_flood_is_refused_and_the_server_goes_on() {
    let served = serve(AppState::builder()).await;
    let addr = served.addr;
    // Ten thousand headers.
    let mut req = b"GET /pools HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n".to_vec();
    for i in 0..10_000 {
        req.extend_from_slice(format!("X-Flood-{i}: {i}\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    let (status, _) = http(addr, &req).await;
    assert!(status == 431 || status == 0, "status {status}");
    // One header of 2 MiB.
    let mut req =
        b"GET /pools HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Big: ".to_vec();
    req.extend(std::iter::repeat_n(b'a', 2 << 20));
    req.extend_from_slice(b"\r\n\r\n");
    let (status, _) = http(addr, &req).await;
    assert!(status == 431 || status == 0, "status {status}");
    // A hundred connections that send part of their headers and stall.
    let mut stalled = Vec::new();
    for _ in 0..100 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /pools HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .await
            .unwrap();
        stalled.push(s);
    }
    a_job_answers_within(addr, Duration::from_secs(2)).await;
    drop(stalled);
    a_job_answers_within(addr, Duration::from_secs(2)).await;
    served.stop().await;
}
