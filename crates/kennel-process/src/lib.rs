//! Workers for [`kennel`]: a child process that speaks JSON lines
//! ([`Coprocess`]) and a dedicated OS thread that holds state
//! ([`ThreadWorker`]). Both implement [`kennel::Worker`], so a pool
//! can lend them; both can also be used on their own.
//!
//! # A child process
//!
//! A [`CoprocessSpec`] says how to start the program (an argv, never a
//! shell; environment; working directory; limits). [`CoprocessSpec::spawn`]
//! starts it in a process group of its own; [`Coprocess::request`] and
//! [`Coprocess::call`] send one request and read one reply. The protocol,
//! for the authors of worker programs, is in `docs/PROTOCOL.md`.
//!
//! ```no_run
//! use kennel_process::CoprocessSpec;
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), kennel_process::ProcessError> {
//! let mut worker = CoprocessSpec::new(["python3", "examples/workers/echo.py"]).spawn()?;
//! worker.ready().await?;
//! assert_eq!(worker.request(&json!([1, 2, 3])).await?, json!([1, 2, 3]));
//! worker.close().await;
//! # Ok(()) }
//! ```
//!
//! # In a pool
//!
//! [`CoprocessSpec::pool`] builds a pool whose workers are one spec, each
//! labelled with its pool and slot (its docs have an example); a factory of
//! your own can do the same with [`CoprocessSpec::for_slot`]. A job's
//! result is two `Result`s: the outer one the pool's error (timeout,
//! crash, closed), the inner one the worker's (an error reply, bad
//! output). A worker that ends under a job fails it with the pool's
//! [`kennel::Error::Crashed`], which carries its exit and last words.
//!
//! # Keys
//!
//! In a pool whose jobs carry keys, a coprocess loads and unloads keys
//! when the pool asks ([`Coprocess::load`], [`Coprocess::unload`]: the
//! line `{"kennel_load": "…"}` in JSON lines, a call of
//! [`CoprocessSpec::load_method`] in JSON-RPC), or, in a pool bound by
//! [`KeyBinding::Spawn`](kennel::KeyBinding::Spawn), is started for one key
//! ([`CoprocessSpec::for_slot`]: `KENNEL_KEY`, `{key}` in its argv). The
//! messages are in `docs/PROTOCOL.md`, "Keys: load and unload".
//!
//! # A language server
//!
//! In the `content-length` framing with [`Handshake::lsp`], a coprocess
//! speaks LSP: [`Coprocess::notify`] sends notifications such as
//! `textDocument/didOpen`, [`Coprocess::request`] a hover; the server's
//! requests are answered as [`CoprocessSpec::answer`] says; and
//! [`Coprocess::close`] sends `shutdown` then `exit`.
//!
//! ```no_run
//! use kennel_process::{CoprocessSpec, Framing, Handshake};
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), kennel_process::ProcessError> {
//! let spec = CoprocessSpec::new(["pyright-langserver", "--stdio"])
//!     .framing(Framing::ContentLength)
//!     .handshake(
//!         Handshake::lsp()
//!             .param("rootUri", json!("file:///srv/project"))
//!             .capabilities(json!({"workspace": {"configuration": true}})),
//!     )
//!     .settings(json!({"python": {"analysis": {"extraPaths": ["/srv/lib"]}}}));
//! let mut server = spec.spawn()?;
//! let doc = json!({"uri": "file:///srv/project/new.py", "languageId": "python",
//!                  "version": 1, "text": "def f(x: int) -> str: ..."});
//! server.notify("textDocument/didOpen", Some(&json!({"textDocument": doc}))).await?;
//! let hover = server
//!     .request(&json!({"method": "textDocument/hover", "params": {
//!         "textDocument": {"uri": "file:///srv/project/new.py"},
//!         "position": {"line": 0, "character": 4},
//!     }}))
//!     .await?;
//! server.close().await; // shutdown, exit: it exits 0
//! # Ok(()) }
//! ```
//!
//! # A thread
//!
//! [`ThreadWorker::spawn`] starts an OS thread that builds its state, then
//! [`ThreadWorker::run`] sends it jobs. CPU-bound work stays off the async
//! runtime. A thread cannot be killed: see [`ThreadWorker`] for what a kill
//! does instead.
//!
//! # Platform
//!
//! [`Coprocess`] uses Unix process groups and signals; this crate builds on
//! Unix only. On Linux each worker also gets SIGKILL when the process that
//! started it dies (`PR_SET_PDEATHSIG`), even by `kill -9`: that request is
//! the one `unsafe` block of the crate (ADR 0016), hence its lint
//! `unsafe_code = "deny"` where the rest of the workspace forbids it.

#![cfg(unix)]

mod answers;
mod coprocess;
mod crash;
#[cfg(target_os = "linux")]
mod deathsig;
mod error;
mod frames;
mod framing;
mod group;
mod json;
mod lines;
mod pin;
mod pool;
mod progress;
mod spec;
mod stream;
mod thread;
mod threads;

pub use crate::answers::LSP_NULL_REQUESTS;
pub use crate::coprocess::{
    Coprocess, Relay, STDERR_BYTES_BURST, STDERR_BYTES_PER_SEC, STDERR_LINES_BURST,
    STDERR_LINES_PER_SEC, STDERR_TAIL_BYTES, STDERR_TAIL_LINES, StderrTail,
};
pub use crate::error::{ProcessError, ThreadError};
pub use crate::framing::{Framing, Handshake, MCP_PROTOCOL_VERSION};
pub use crate::json::JsonBytes;
pub use crate::progress::Progress;
pub use crate::spec::{CoprocessSpec, DEFAULT_CLOSE_GRACE, DEFAULT_MAX_LINE_BYTES, ReadyMode};
pub use crate::stream::{CallStream, CallStreaming, PROGRESS_BUFFER, Streamed};
pub use crate::thread::ThreadWorker;
pub use crate::threads::{THREAD_VARIABLES, ThreadBudget};
