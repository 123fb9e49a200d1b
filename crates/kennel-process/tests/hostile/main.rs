//! Hostile worker output: whatever bytes a worker writes on stdout — invalid
//! UTF-8, NULs, huge lines, partial lines, lines dripped a byte at a time,
//! error lines with odd messages — a `Coprocess` answers with the reply, a
//! worker error, or a clear `Protocol` / `Crashed` error, never a panic; a
//! broken worker is killed and, in a pool, replaced.
//!
//! The property tests compare each answer with a small reference reading of
//! the protocol (docs/PROTOCOL.md): split on `\n`, drop one `\r`, skip blank
//! lines, refuse a line over the limit, parse the first other line as JSON.
//! `PROPTEST_CASES=N` runs N cases of each (default 128; 32 for the pool).

#![cfg(target_os = "linux")]

#[path = "../common/mod.rs"]
mod common;

mod lines;
mod properties;
mod reference;
mod strategies;

/// The tests of this target run one at a time, so that the memory measured
/// by one is its own.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The line limit of these workers: small, so that long lines are cheap.
const LIMIT: usize = 256;
