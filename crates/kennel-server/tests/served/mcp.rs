//! The helpers of the tests of `/mcp/{pool}` (`mcp_gateway.rs`,
//! `mcp_transport.rs`).

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::{Server, Stderr};

/// The MCP clients and the small MCP server of the tests.
pub fn clients() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_clients")
}

/// `kennel serve` on a free loopback port with the pool table `pool`.
pub fn serve(name: &str, pool: &str) -> Server {
    let config = format!("[server]\nlisten = \"127.0.0.1:0\"\n\n{pool}");
    Server::start(
        name,
        &config,
        &[],
        &[("RUST_LOG", "warn")],
        Stderr::Collected,
    )
}

/// The pids of pool `pool`'s workers, by slot.
pub fn pids(server: &Server, pool: &str) -> BTreeSet<u64> {
    let rows = server.get_json(&format!("/pools/{pool}/workers"));
    rows["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["pid"].as_u64())
        .collect()
}
