//! A pool's events as the tests read them: drained, by name, the
//! retirements, a count.

use kennel::{Event, RetireReason};
use tokio::sync::broadcast;

/// Drains the events received so far.
pub fn drain(rx: &mut broadcast::Receiver<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// The names of the events received so far.
pub fn names(rx: &mut broadcast::Receiver<Event>) -> Vec<&'static str> {
    drain(rx).iter().map(Event::name).collect()
}

/// The `worker:retired` events among `events`: (slot, reason), in order.
pub fn retired(events: &[Event]) -> Vec<(usize, RetireReason)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Retired { slot, reason, .. } => Some((*slot, *reason)),
            _ => None,
        })
        .collect()
}

/// How many of `events` are named `name` (as `worker:crashed`).
pub fn count(events: &[Event], name: &str) -> usize {
    events.iter().filter(|e| e.name() == name).count()
}
