//! `server.runtime_threads` against the real `kennel serve`: the service's
//! runtime runs on half the CPUs by default and on the number set
//! otherwise, as the runtime itself counts its threads; a reload names a
//! changed value as not applied.

mod served;

use served::{Server, Stderr};

const SERVER: &str = "[server]\nlisten = \"127.0.0.1:0\"\n";

/// The CPUs this process may use, as kennel counts them.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

#[test]
fn the_runtime_runs_on_half_the_cpus_by_default() {
    let server = Server::start("runtime-auto", SERVER, &[], &[], Stderr::Collected);
    let expected = (cpus() / 2).max(1);
    assert_eq!(
        server.printed_line("  runtime threads"),
        format!(
            "  runtime threads {expected} (auto: half of {} CPUs)",
            cpus()
        )
    );
}

#[test]
fn the_runtime_runs_on_the_threads_set_and_a_reload_does_not_change_them() {
    // No pool: the file allows it, or a reload would refuse it.
    let toml = format!("{SERVER}allow_no_pools = true\nruntime_threads = 3\n");
    let server = Server::start("runtime-set", &toml, &[], &[], Stderr::Collected);
    assert_eq!(
        server.printed_line("  runtime threads"),
        "  runtime threads 3"
    );

    std::fs::write(
        &server.config,
        format!("{SERVER}allow_no_pools = true\nruntime_threads = 5\n"),
    )
    .unwrap();
    let a = server.http("POST", "/reload", &[], "");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.json()["server_keys_not_applied"],
        serde_json::json!(["server.runtime_threads"]),
        "{}",
        a.body
    );
}
