//! An MCP session of the gateway: what it knows of its client, its
//! requests in flight, the worker's requests that wait for the client's
//! answer, its streams; and the table of sessions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::SessionKind;

/// The most sessions the service holds at once, over every pool; an
/// `initialize` beyond it is answered 503.
pub(crate) const MAX_SESSIONS: usize = 4096;

/// The most requests one session may have in flight; more are answered
/// with an error.
pub(crate) const MAX_IN_FLIGHT: usize = 64;

/// The most requests of the worker's that may wait for one session's
/// client to answer; more are answered by kennel (as if the client did not
/// serve them).
const MAX_ASKED: usize = 64;

/// How many messages may wait for a slow client on one stream; more
/// notifications are dropped (a response never is: it waits).
pub(crate) const STREAM_BUFFER: usize = 256;

/// The longest session id a client may send; a longer one names no session.
const MAX_ID_LEN: usize = 64;

/// The requests of the worker's that need a client capability, and that
/// capability.
const ASKS: [(&str, &str); 3] = [
    ("sampling/createMessage", "sampling"),
    ("elicitation/create", "elicitation"),
    ("roots/list", "roots"),
];

/// One session.
pub(crate) struct Session {
    /// Its id, as the `Mcp-Session-Id` header carries it.
    pub(crate) id: String,
    /// The pool it was opened on.
    pub(crate) pool: String,
    /// How its requests find a worker.
    pub(crate) kind: SessionKind,
    /// Who opened it: only the same caller may use it, and its requests
    /// run as that caller's tenant.
    pub(crate) caller: crate::tenants::Caller,
    /// The worker's requests its client answers, by its capabilities.
    asks: Vec<&'static str>,
    /// Its task (for an exclusive session, the one that holds its worker)
    /// takes its requests and notifications, in order.
    pub(crate) task: mpsc::Sender<super::task::Command>,
    /// Cancelled when the session ends (DELETE, idle, its worker's end).
    pub(crate) ended: CancellationToken,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The client's requests in flight, by their id (as JSON text).
    in_flight: HashMap<String, CancellationToken>,
    /// The worker's requests handed to the client, by the id kennel gave
    /// them: the worker's own id, and where the answer goes.
    asked: HashMap<String, (Value, mpsc::Sender<Value>)>,
    next_ask: u64,
    /// Exclusive: the stream of the request in hand.
    request_stream: Option<mpsc::Sender<Value>>,
    /// The stream the client opened with GET.
    get_stream: Option<mpsc::Sender<Value>>,
    /// When a request last came or went.
    last_active: Option<Instant>,
}

/// Where the worker's messages go while a relay runs.
pub(crate) enum Target {
    /// The stream of one request (a shared session's).
    Stream(mpsc::Sender<Value>),
    /// The request in hand, else the GET stream (an exclusive session's).
    Session,
}

impl Session {
    /// A new session of `pool` for a client that declared `capabilities`.
    pub(crate) fn new(
        pool: String,
        kind: SessionKind,
        capabilities: Option<&Value>,
        task: mpsc::Sender<super::task::Command>,
        caller: crate::tenants::Caller,
    ) -> Self {
        let asks = ASKS
            .iter()
            .filter(|(_, cap)| capabilities.and_then(|c| c.get(cap)).is_some())
            .map(|(method, _)| *method)
            .collect();
        Self {
            id: format!("{:032x}", rand::random::<u128>()),
            pool,
            kind,
            caller,
            asks,
            task,
            ended: CancellationToken::new(),
            state: Mutex::new(State {
                last_active: Some(Instant::now()),
                ..State::default()
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a request of the client's in flight, with the token that
    /// cancels it; `None` when the session has too many.
    pub(crate) fn begin(&self, id: &Value) -> Option<CancellationToken> {
        let mut state = self.state();
        if state.in_flight.len() >= MAX_IN_FLIGHT {
            return None;
        }
        let token = self.ended.child_token();
        state.in_flight.insert(id.to_string(), token.clone());
        state.last_active = Some(Instant::now());
        Some(token)
    }

    /// The request `id` is over.
    pub(crate) fn finish(&self, id: &Value) {
        let mut state = self.state();
        state.in_flight.remove(&id.to_string());
        state.last_active = Some(Instant::now());
    }

    /// The client's `notifications/cancelled` for request `id`.
    pub(crate) fn cancel(&self, id: &Value) {
        if let Some(token) = self.state().in_flight.get(&id.to_string()) {
            token.cancel();
        }
    }

    /// Exclusive: the stream of the request in hand (`None` once it is over).
    pub(crate) fn route_to(&self, stream: Option<mpsc::Sender<Value>>) {
        self.state().request_stream = stream;
    }

    /// The client's GET stream, in place of an earlier one.
    pub(crate) fn open_stream(&self, stream: mpsc::Sender<Value>) {
        self.state().get_stream = Some(stream);
    }

    /// When the session has been idle since `idle` ago, or `None` while
    /// a request is in flight or its GET stream is open.
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        let state = self.state();
        let open = state.get_stream.as_ref().is_some_and(|s| !s.is_closed());
        if !state.in_flight.is_empty() || open {
            return None;
        }
        state.last_active
    }

    /// Notes activity now (a request, a notification, an answer).
    pub(crate) fn touch(&self) {
        self.state().last_active = Some(Instant::now());
    }

    /// Drops its streams and forgets what it waited for: its client's
    /// streams end.
    pub(crate) fn close(&self) {
        let mut state = self.state();
        state.request_stream = None;
        state.get_stream = None;
        state.asked.clear();
        for token in state.in_flight.values() {
            token.cancel();
        }
    }

    /// The function a [`Relay`](kennel_process::Relay) hands the worker's
    /// messages to: a request the client can answer gets an id of
    /// kennel's (its answer goes to `answers`); a message the stream
    /// cannot take now is dropped (a request then is answered by kennel).
    pub(crate) fn forwarder(
        self: &Arc<Self>,
        target: Target,
        answers: mpsc::Sender<Value>,
    ) -> impl FnMut(Value) -> bool + Send + 'static {
        let session = Arc::clone(self);
        move |mut message: Value| {
            let stream = match &target {
                Target::Stream(stream) => Some(stream.clone()),
                Target::Session => {
                    let state = session.state();
                    state
                        .request_stream
                        .clone()
                        .or_else(|| state.get_stream.clone())
                }
            };
            let Some(stream) = stream else { return false };
            let method = message.get("method").and_then(Value::as_str);
            let (Some(method), Some(id)) = (method, message.get("id").cloned()) else {
                return stream.try_send(message).is_ok();
            };
            if !session.asks.contains(&method) {
                return false;
            }
            let ours = {
                let mut state = session.state();
                if state.asked.len() >= MAX_ASKED {
                    return false;
                }
                state.next_ask += 1;
                let ours = format!("kennel-{}", state.next_ask);
                state.asked.insert(ours.clone(), (id, answers.clone()));
                ours
            };
            message["id"] = Value::String(ours.clone());
            if stream.try_send(message).is_ok() {
                return true;
            }
            session.state().asked.remove(&ours);
            false
        }
    }

    /// The client's answer to a request of the worker's: to the worker,
    /// with the worker's own id. An answer to nothing asked is dropped.
    pub(crate) fn answer(&self, mut message: Value) {
        let Some(ours) = message.get("id").and_then(Value::as_str) else {
            return;
        };
        let Some((theirs, answers)) = self.state().asked.remove(ours) else {
            return;
        };
        message["id"] = theirs;
        self.touch();
        // A relay that is gone no longer waits for it.
        let _ = answers.try_send(message);
    }
}

/// The sessions of the service, by id.
#[derive(Clone, Default)]
pub(crate) struct Sessions(Arc<Mutex<HashMap<String, Arc<Session>>>>);

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session `id` names (an id from the network: any text).
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        if id.len() > MAX_ID_LEN {
            return None;
        }
        self.lock().get(id).cloned()
    }

    /// Adds `session`; `false` when the service holds [`MAX_SESSIONS`].
    pub(crate) fn insert(&self, session: Arc<Session>) -> bool {
        let mut all = self.lock();
        if all.len() >= MAX_SESSIONS {
            return false;
        }
        all.insert(session.id.clone(), session);
        true
    }

    /// Takes session `id` out.
    pub(crate) fn remove(&self, id: &str) {
        self.lock().remove(id);
    }
}
