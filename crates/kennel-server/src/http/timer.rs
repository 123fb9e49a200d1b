//! The timer of one connection: hyper's header read timeout, told apart
//! for the first request (`header_timeout`, counted from the accept) and
//! the next ones of a kept-alive connection (`idle_timeout`, counted from
//! the end of the previous response).
//!
//! hyper has one setting, `header_read_timeout`, whose timer starts each
//! time the connection waits for a request's head, and it asks its
//! [`Timer`] for a new sleep each time. This timer answers the first ask
//! with hyper's deadline and moves every later one by
//! `idle_timeout - header_timeout`. A test
//! (`a_kept_alive_connection_closes_after_the_idle_timeout`) pins the
//! behaviour of the hyper version in use.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};
use hyper_util::rt::TokioTimer;

/// The timer of one connection (a new one for each).
#[derive(Debug)]
pub(crate) struct ConnTimer {
    inner: TokioTimer,
    first_done: AtomicBool,
    header: Duration,
    idle: Duration,
}

impl ConnTimer {
    /// hyper is given `header` as its header read timeout.
    pub(crate) fn new(header: Duration, idle: Duration) -> Self {
        Self {
            inner: TokioTimer::new(),
            first_done: AtomicBool::new(false),
            header,
            idle,
        }
    }

    fn moved(&self, deadline: Instant) -> Instant {
        if !self.first_done.swap(true, Ordering::Relaxed) {
            return deadline;
        }
        (deadline + self.idle)
            .checked_sub(self.header)
            .unwrap_or(deadline)
    }
}

impl Timer for ConnTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.inner.sleep(duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        self.inner.sleep_until(self.moved(deadline))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        self.inner.reset(sleep, self.moved(new_deadline));
    }
}
