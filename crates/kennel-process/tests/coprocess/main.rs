//! The JSON-lines protocol of a `Coprocess` (docs/PROTOCOL.md), with real child
//! processes: replies, error replies, bad output, crashes and cancellation.

#![cfg(target_os = "linux")]

#[path = "../common/mod.rs"]
mod common;

mod child;
mod replies;
mod warm_up;
