//! Trying again while NATS is away: a pause that doubles from 50 ms up to
//! half a second, until a limit since the first try. The claim of a job,
//! the storing of its record and the confirming of a publish all wait so.

use std::time::Duration;

use tokio::time::Instant;

/// The longest pause between two tries.
const MOST: Duration = Duration::from_millis(500);

/// One operation's tries.
pub(super) struct Away {
    until: Instant,
    pause: Duration,
}

impl Away {
    /// Tries for up to `limit` from now.
    pub(super) fn for_(limit: Duration) -> Self {
        Self {
            until: Instant::now() + limit,
            pause: Duration::from_millis(50),
        }
    }

    /// Waits before the next try, a little longer each time; gives
    /// `error` back once the limit has passed.
    ///
    /// # Errors
    ///
    /// `error`, once the limit has passed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only sleeps.
    pub(super) async fn wait<E>(&mut self, error: E) -> Result<(), E> {
        if Instant::now() + self.pause > self.until {
            return Err(error);
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(MOST);
        Ok(())
    }
}
