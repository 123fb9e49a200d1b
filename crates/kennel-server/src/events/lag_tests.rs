//! A subscriber of `/events` that stops reading is let go with a last
//! `lagged` event, over a real socket.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use serde_json::json;

fn subscribe(addr: std::net::SocketAddr, path: &str, headers: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n").as_bytes())
        .unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_stops_reading_is_let_go_with_a_last_lagged_event() {
    let state = crate::AppState::empty();
    let listener = crate::http::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let router = crate::app(state.clone());
    let server = tokio::spawn(crate::http::serve(
        listener,
        router,
        crate::http::ConnOptions::default(),
        std::future::pending(),
    ));
    // The answer's head comes once the subscription is made: read it (one
    // byte at a time, so that nothing of the body is taken), then read no
    // more.
    let mut slow = tokio::task::spawn_blocking(move || {
        let mut s = subscribe(addr, "/events", "Connection: close\r\n");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(
                s.read(&mut byte).unwrap(),
                1,
                "the stream ended in its head"
            );
            head.push(byte[0]);
        }
        assert!(
            head.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&head)
        );
        s
    })
    .await
    .unwrap();
    // Far more than the subscriber's buffer and the socket's, unread.
    let pool: Arc<str> = "p".into();
    let ring = super::Ring::default();
    let big = "x".repeat(4096);
    for i in 0..(super::EVENT_BUFFER * 8) {
        state
            .events()
            .publish(&ring, &pool, "pool:warning", &json!({ "i": i, "pad": big }));
        if i % 256 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let tail = tokio::task::spawn_blocking(move || {
        let mut all = Vec::new();
        let _ = slow.read_to_end(&mut all);
        String::from_utf8_lossy(&all).into_owned()
    })
    .await
    .unwrap();
    let last = tail
        .trim_end()
        .rsplit("\n\n")
        .find(|f| f.contains("event:"))
        .unwrap();
    assert!(
        last.contains("event: lagged"),
        "{}",
        &tail[tail.len().saturating_sub(500)..]
    );
    assert!(last.contains("\"missed\":"), "{last}");
    server.abort();
}
