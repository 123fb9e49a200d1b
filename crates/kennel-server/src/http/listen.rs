//! The accept loop: each connection served by hyper's HTTP/1 with a
//! header timeout for the first request, an idle timeout between the next
//! ones (`ConnTimer`), a write stall timeout (`StallTimeout`), and at
//! most [`ConnectionBudget::connections`] at once; then a graceful stop.
//!
//! [`ConnectionBudget::connections`]: super::ConnectionBudget::connections

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::stall::StallTimeout;
use super::timer::ConnTimer;
use crate::metrics::Counted;

/// How long a new request's head may take when no limit is given.
pub(crate) const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a kept-alive connection may wait for its next request when no
/// limit is given.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a write may wait for the peer to read when no limit is given.
pub(crate) const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// The listen queue asked for: connections the kernel completes before the
/// loop accepts them (the kernel caps it at `net.core.somaxconn`). The
/// standard library's 128 overflows under a burst of connections, and a
/// dropped SYN costs its client a second.
pub(crate) const LISTEN_BACKLOG: u32 = 4096;

/// Binds a listener on `addr` with a listen queue of [`LISTEN_BACKLOG`].
///
/// # Errors
///
/// When the address cannot be bound (in use, not local, …).
pub(crate) fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// After an accept fails (no descriptor left, …), the loop waits this long.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// How each connection is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnOptions {
    /// From the accept to the end of the first request's head.
    pub header_timeout: Duration,
    /// From the end of a response to the end of the next request's head.
    pub idle_timeout: Duration,
    /// The longest a write waits for the peer to read.
    pub write_timeout: Duration,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
}

impl Default for ConnOptions {
    fn default() -> Self {
        Self {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            max_connections: super::limits::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Serves `router` (in `kennel serve`, [`app`](crate::app)'s) on
/// `listener` until `stop` resolves, then stops accepting, lets each
/// connection finish the request it is on (an idle one closes at once; one
/// still sending its head has until its header timeout) and resolves when
/// every connection has ended.
///
/// # Errors
///
/// None so far: a failed accept is logged and retried after a pause.
///
/// # Cancel safety
///
/// Dropping the future closes the listener and drops every connection at
/// once (their tasks are aborted): this is how the shutdown grace ends.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ConnOptions,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut conns = JoinSet::new();
    tokio::pin!(stop);
    loop {
        while conns.try_join_next().is_some() {}
        let permit = tokio::select! {
            biased;
            () = &mut stop => break,
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            biased;
            () = &mut stop => break,
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(target: "kennel_server", error = %e, "cannot accept a connection");
                    tokio::select! {
                        () = &mut stop => break,
                        () = tokio::time::sleep(ACCEPT_PAUSE) => continue,
                    }
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(StallTimeout::new(stream, options.write_timeout));
        let mut builder = http1::Builder::new();
        builder
            .timer(ConnTimer::new(options.header_timeout, options.idle_timeout))
            .header_read_timeout(options.header_timeout)
            .keep_alive(true);
        let conn = builder.serve_connection(io, TowerToHyperService::new(router.clone()));
        let watched = graceful.watch(conn);
        conns.spawn(async move {
            // Open: its permit held and counted while it lives.
            let _open = (permit, Counted::new("kennel_http_connections"));
            if let Err(e) = watched.await {
                tracing::debug!(target: "kennel_server", error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
