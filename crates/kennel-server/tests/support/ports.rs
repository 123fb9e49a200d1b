//! Loopback ports for servers a test starts, and may start again on the
//! same port.

use std::net::TcpListener;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

/// A loopback port nothing listens on, for a server a test starts and may
/// start again on the same port. It is taken outside the kernel's
/// ephemeral range (below it, else above it), so that no `bind(0)` and no
/// outgoing connection (another test's server, a reconnecting client)
/// takes it while that server is down; one process never hands it out
/// twice, and the process id spreads test processes apart in the range.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let range = outside_ephemeral();
    let span = range.end - range.start;
    let start = std::process::id().wrapping_mul(97) % span;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < span, "no loopback port left in {range:?}");
        let port = u16::try_from(range.start + (start + n) % span).unwrap();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// The ports the kernel does not hand out on its own: at least 1,000 of
/// them below its ephemeral range from 10,000 up, else above the range;
/// where the range leaves neither, Linux's default gap.
fn outside_ephemeral() -> Range<u32> {
    const LOW: u32 = 10_000;
    const ROOM: u32 = 1_000;
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| {
            let mut ends = r.split_whitespace().map(|n| n.parse::<u32>().ok());
            Some((ends.next()??, ends.next()??))
        });
    match ephemeral {
        Some((first, _)) if first >= LOW + ROOM => LOW..first,
        Some((_, last)) if last + ROOM <= 65_535 => last + 1..65_536,
        _ => LOW..32_768,
    }
}
