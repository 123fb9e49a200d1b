//! The event hub behind `/events`: each pool's events are
//! serialised once into a [`Frame`] and shared by every subscriber, a
//! bounded ring per pool keeps the recent ones for late subscribers
//! (`Last-Event-ID`, `?since=`; the ring is kept in the pool's record of
//! the state, so it goes with the pool), rejections come as counts, and a
//! subscriber that falls [`EVENT_BUFFER`] frames behind gets a last
//! `lagged` event and is let go. Each frame carries its `time`, the wall
//! clock as the hub took the event (RFC 3339, UTC, milliseconds), made
//! with the frame, so a replay shows when the event happened (ADR 0059).

mod frame;
mod json;
mod rejections;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use kennel::Event;
use serde_json::Value;
use tokio::sync::broadcast;

pub(crate) use self::frame::{Frame, KEEP_ALIVE, lagged};
pub(crate) use self::json::event_json;
pub(crate) use self::rejections::REJECTIONS_EVERY;

use self::rejections::Rejections;
use crate::lock;

/// How many frames a subscriber may fall behind before it is let go.
pub(crate) const EVENT_BUFFER: usize = 1024;

/// How many recent frames each pool keeps for late subscribers.
pub(crate) const REPLAY_PER_POOL: usize = 256;

/// The hub: one per service. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct EventHub {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tx: broadcast::Sender<Arc<Frame>>,
    /// The next frame's id. Taken to publish and to subscribe, so that a
    /// subscriber's replay and its live frames neither overlap nor leave a
    /// gap.
    next_id: Mutex<u64>,
}

/// The recent frames of one pool, oldest first (at most
/// [`REPLAY_PER_POOL`]). Cheap to clone: clones share the ring.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ring(Arc<Mutex<VecDeque<Arc<Frame>>>>);

/// A new subscription: the frames to replay first, then the live ones.
#[derive(Debug)]
pub(crate) struct Subscription {
    /// Frames after the id asked for, oldest first.
    pub replay: Vec<Arc<Frame>>,
    /// Every frame published from now on.
    pub live: broadcast::Receiver<Arc<Frame>>,
}

impl EventHub {
    /// A hub with no pool yet.
    pub(crate) fn new() -> Self {
        let (tx, _) = broadcast::channel(EVENT_BUFFER);
        Self {
            inner: Arc::new(Inner {
                tx,
                next_id: Mutex::new(1),
            }),
        }
    }

    /// Publishes one frame of `pool`: stamped with the wall clock now (a
    /// `time` key added to an object `data`), kept in its `ring`, sent to
    /// every subscriber.
    pub(crate) fn publish(&self, ring: &Ring, pool: &Arc<str>, name: &'static str, data: &Value) {
        let mut data = data.clone();
        let mut next_id = lock(&self.inner.next_id);
        let id = *next_id;
        *next_id += 1;
        // Taken under the lock: times follow the order of the ids.
        if let Value::Object(fields) = &mut data {
            let time = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
            fields.insert("time".to_owned(), time.into());
        }
        let frame = Arc::new(Frame::new(id, pool.clone(), name, &data));
        {
            let mut frames = lock(&ring.0);
            if frames.len() == REPLAY_PER_POOL {
                frames.pop_front();
            }
            frames.push_back(frame.clone());
        }
        // A send only queues the frame (no subscriber is fine); it is done
        // under the lock so that frames leave in the order of their ids.
        let _ = self.inner.tx.send(frame);
    }

    /// Subscribes: with `since`, the kept frames after that id in the
    /// `rings` (asked for once the hub is held) come first.
    pub(crate) fn subscribe(
        &self,
        since: Option<u64>,
        rings: impl FnOnce() -> Vec<Ring>,
    ) -> Subscription {
        let held = lock(&self.inner.next_id);
        let live = self.inner.tx.subscribe();
        let mut replay: Vec<Arc<Frame>> = match since {
            None => Vec::new(),
            Some(since) => rings()
                .iter()
                .flat_map(|ring| {
                    lock(&ring.0)
                        .iter()
                        .filter(|f| f.id > since)
                        .cloned()
                        .collect::<Vec<_>>()
                })
                .collect(),
        };
        drop(held);
        replay.sort_by_key(|f| f.id);
        Subscription { replay, live }
    }

    /// Forwards the events of one pool to the hub, kept in `ring`, until
    /// the pool closes:
    /// each event is serialised once; rejections are counted and sent as
    /// one `jobs:rejected` frame a second, and logged every 10 s.
    ///
    /// # Errors
    ///
    /// None: it ends with the pool.
    ///
    /// # Cancel safety
    ///
    /// Dropping it loses the rejections counted since the last report.
    pub(crate) async fn forward(
        self,
        ring: Ring,
        pool: Arc<str>,
        mut rx: broadcast::Receiver<Event>,
    ) {
        let mut rejections = Rejections::new();
        let mut tick = tokio::time::interval(REJECTIONS_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next = tokio::select! {
                r = rx.recv() => r,
                _ = tick.tick() => {
                    self.report(&ring, &pool, &mut rejections, false);
                    continue;
                }
            };
            match next {
                Ok(Event::Rejected { reason }) => rejections.count(reason),
                Ok(event) => {
                    let closed = matches!(event, Event::Closed);
                    if closed {
                        self.report(&ring, &pool, &mut rejections, true);
                    }
                    self.publish(&ring, &pool, event.name(), &event_json(&pool, &event));
                    if closed {
                        break;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(target: "kennel_server", pool = &*pool, missed = n, "event forwarder fell behind");
                }
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    }

    fn report(&self, ring: &Ring, pool: &Arc<str>, rejections: &mut Rejections, now: bool) {
        if let Some(data) = rejections.take_event(pool) {
            self.publish(ring, pool, "jobs:rejected", &data);
        }
        rejections.log(pool, now);
    }
}

#[cfg(test)]
mod lag_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_late_subscriber_replays_what_came_after_its_id_and_nothing_twice() {
        let hub = EventHub::new();
        let (a, ring_a): (Arc<str>, _) = ("a".into(), Ring::default());
        let (b, ring_b): (Arc<str>, _) = ("b".into(), Ring::default());
        for i in 0..3 {
            hub.publish(&ring_a, &a, "worker:ready", &json!({ "i": i }));
            hub.publish(&ring_b, &b, "worker:ready", &json!({ "i": i }));
        }
        let both = || vec![ring_a.clone(), ring_b.clone()];
        let mut sub = hub.subscribe(Some(2), both);
        let ids: Vec<u64> = sub.replay.iter().map(|f| f.id).collect();
        assert_eq!(ids, [3, 4, 5, 6]);
        let only_a = hub.subscribe(Some(0), || vec![ring_a.clone()]);
        assert!(only_a.replay.iter().all(|f| &*f.pool == "a"));
        hub.publish(&ring_a, &a, "worker:exited", &json!({}));
        assert_eq!(sub.live.try_recv().unwrap().id, 7);
    }

    #[test]
    fn each_pool_keeps_a_bounded_ring() {
        let hub = EventHub::new();
        let (a, ring): (Arc<str>, _) = ("a".into(), Ring::default());
        for i in 0..(REPLAY_PER_POOL + 10) {
            hub.publish(&ring, &a, "worker:ready", &json!({ "i": i }));
        }
        let sub = hub.subscribe(Some(0), || vec![ring.clone()]);
        assert_eq!(sub.replay.len(), REPLAY_PER_POOL);
        assert_eq!(sub.replay[0].id, 11);
    }

    #[test]
    fn a_frame_is_serialised_once_and_shared() {
        let hub = EventHub::new();
        let mut one = hub.subscribe(None, Vec::new);
        let mut two = hub.subscribe(None, Vec::new);
        hub.publish(
            &Ring::default(),
            &"p".into(),
            "worker:ready",
            &json!({"slot": 0}),
        );
        let (f1, f2) = (one.live.try_recv().unwrap(), two.live.try_recv().unwrap());
        assert!(Arc::ptr_eq(&f1, &f2));
        let sse = String::from_utf8_lossy(&f1.sse);
        let time = sse
            .split("\"time\":\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap();
        assert_eq!(
            sse,
            format!("id: 1\nevent: worker:ready\ndata: {{\"slot\":0,\"time\":\"{time}\"}}\n\n")
        );
    }
}
