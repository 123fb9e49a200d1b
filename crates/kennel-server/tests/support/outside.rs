//! Tests whose outside part (nats-server, Chromium, an MCP server from
//! PyPI or npm) is not installed here: such a test fails, naming what to
//! install, unless `KENNEL_ALLOW_SKIP=1` lets it pass without running
//! (then it says SKIPPED on stderr). `.ci/run` installs every such part,
//! so CI runs them all; `cargo test --workspace` on a bare machine fails
//! loudly instead of passing silently.

/// The variable that lets a test whose outside part is missing pass
/// without running.
pub const ALLOW_SKIP: &str = "KENNEL_ALLOW_SKIP";

/// `found`, or, when it is `None`: a failure of `test` naming `what` is
/// missing and how to `install` it; with `KENNEL_ALLOW_SKIP=1`, `None`
/// after a SKIPPED line on stderr (the test then returns).
#[track_caller]
pub fn needed<T>(test: &str, what: &str, install: &str, found: Option<T>) -> Option<T> {
    if found.is_some() {
        return found;
    }
    let note = format!("{test}: {what} is not installed; {install} (.ci/run installs it)");
    assert!(
        std::env::var(ALLOW_SKIP).as_deref() == Ok("1"),
        "{note}, or set {ALLOW_SKIP}=1 to let this test pass without running"
    );
    eprintln!("SKIPPED ({ALLOW_SKIP}=1): {note}");
    None
}
