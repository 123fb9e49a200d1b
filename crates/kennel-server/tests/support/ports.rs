//! Loopback ports for servers a test starts, and may start again on the
//! same port.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// A loopback port nothing listens on, for a server a test starts and may
/// start again on the same port. It is taken below the kernel's ephemeral
/// range, so that no `bind(0)` and no outgoing connection (another test's
/// server, a reconnecting client) takes it while that server is down; one
/// process never hands it out twice, and the process id spreads test
/// processes apart in the range.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 10_000;
    let high = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .filter(|&h| h > LOW + 1_000)
        .unwrap_or(32_768);
    let span = high - LOW;
    let start = std::process::id().wrapping_mul(97) % span;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < span, "no loopback port left below {high}");
        let port = u16::try_from(LOW + (start + n) % span).unwrap();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}
