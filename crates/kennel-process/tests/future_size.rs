//! A request's future keeps no room for the paths a healthy worker never
//! takes (its end, its first ready line, a skipped message): those are
//! boxed, so the future a job moves on its way to its task stays small.

#![cfg(target_os = "linux")]

use kennel_process::{CoprocessSpec, JsonBytes};

/// Above what a request's future is (560 bytes on Rust 1.95), well under
/// what it was with the rare paths inline (1,480).
const MOST_BYTES: usize = 1_000;

#[tokio::test]
async fn a_requests_future_keeps_no_room_for_a_workers_rare_paths() {
    let mut worker = CoprocessSpec::new(["cat"]).spawn().expect("spawn");
    let request = JsonBytes::new(b"{}".to_vec()).expect("JSON");
    let future = worker.request_bytes(&request, None);
    let size = std::mem::size_of_val(&future);
    drop(future);
    assert!(
        size <= MOST_BYTES,
        "a request's future is {size} bytes, over {MOST_BYTES}: is a rare path awaited unboxed?"
    );
}
