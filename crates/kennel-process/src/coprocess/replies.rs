//! Reading the reply to the request in hand: the next line that is not a
//! progress line (JSON lines), or the response with its id (JSON-RPC), with
//! progress handed on and everything else skipped.

use super::read::Reading;

use super::reply::{self, Line, LineId, LineKind};
use super::rpc::{self, Inbound};
use super::{Coprocess, Open, Phase};
use crate::error::ProcessError;
use crate::json::JsonBytes;
use crate::lines::excerpt;
use crate::progress::Progress;

impl Coprocess {
    /// JSON lines: the next line that is not a progress line, held to the
    /// job's id.
    pub(super) async fn line_reply(
        &mut self,
        open: &Open,
        on_progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<JsonBytes, ProcessError> {
        loop {
            let bytes = self.next_message(Reading::Reply).await?;
            let line = reply::classify(bytes);
            if let Err(message) = self.check_id(open, &line) {
                return Err(self.protocol_error(message).await);
            }
            let Line { kind, id } = line;
            let reply = match kind {
                LineKind::Reply(raw) => match id {
                    LineId::Id(_, at) if self.spec.job_ids => Ok(reply::without_id(raw, at)),
                    _ => Ok(raw),
                },
                LineKind::Error(err) => Err(err),
                LineKind::Progress(progress) => {
                    self.heartbeat.beat();
                    on_progress(progress);
                    continue;
                }
                LineKind::Ready => {
                    let message = "the worker wrote a second ready line where a reply was due, \
                                   so replies would no longer match requests";
                    return Err(self.protocol_error(message.to_owned()).await);
                }
                LineKind::NotJson(err, excerpt) => {
                    let message = format!("reply is not JSON ({err}); it reads {excerpt}");
                    return Err(self.protocol_error(message).await);
                }
            };
            self.settled();
            self.nothing_after_reply();
            return reply;
        }
    }

    /// JSON lines with job ids: a line with a `kennel_id` is taken only for
    /// the job with that id, and from a worker that said in its ready line
    /// that it echoes the id, a reply object to a job that carries one must
    /// carry it. The message of the protocol error otherwise.
    pub(super) fn check_id(&mut self, open: &Open, line: &Line) -> Result<(), String> {
        if !self.spec.job_ids {
            return Ok(());
        }
        // A reply object or an error reply carries the id of a worker that
        // echoes it.
        let object = match &line.kind {
            LineKind::Reply(raw) => raw.as_bytes().first() == Some(&b'{'),
            LineKind::Error(_) => true,
            _ => false,
        };
        let other = match &line.id {
            LineId::Id(id, _) if open.carries_id && *id == open.id => return Ok(()),
            LineId::Absent if self.echoes_ids && open.carries_id && object => {
                return Err(format!(
                    "the worker said it echoes `kennel_id`, but a reply to job {} carries none, \
                     so it may be another job's",
                    open.id
                ));
            }
            LineId::Absent => return Ok(()),
            LineId::Id(id, _) => id.to_string(),
            LineId::Other(text) => text.clone(),
        };
        let in_hand = if open.carries_id {
            format!("job {}", open.id)
        } else {
            "a job without an id".to_owned()
        };
        Err(format!(
            "the worker wrote a line for another job (`kennel_id` {other}) while {in_hand} was \
             in hand (a reply written twice or late), so replies would no longer match requests"
        ))
    }

    /// JSON lines: nothing may follow a reply until the next request. Output
    /// already waiting after it (a reply written twice, a stray line) means
    /// the worker's next line could be taken for the next job's reply: the
    /// reply just read stands, and the worker is killed, so that the pool
    /// lends the next job another.
    pub(super) fn nothing_after_reply(&mut self) {
        if let Some(head) = self.stdout.lines().unsolicited() {
            event!(
                warn,
                self,
                line = %excerpt(&head),
                "the worker wrote more than one line for a request; killing it"
            );
            self.kill_in_hand();
        }
    }

    /// JSON-RPC: the response with the request's id (or with `also`, a
    /// cancel's `ping`); progress with its token goes to `on_progress`;
    /// anything else is skipped (a request of the worker's is answered).
    pub(super) async fn rpc_reply(
        &mut self,
        open: &Open,
        also: Option<u64>,
        on_progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<JsonBytes, ProcessError> {
        loop {
            let bytes = self.next_message(Reading::Reply).await?;
            match rpc::classify(&bytes) {
                Inbound::Response {
                    id: Some(id),
                    outcome,
                } if id == open.id || Some(id) == also => {
                    self.settled();
                    return outcome.map(JsonBytes::from_raw);
                }
                Inbound::Progress { token, progress } if token == open.token => {
                    self.heartbeat.beat();
                    on_progress(progress);
                }
                other => self.skip(other, &bytes).await,
            }
        }
    }

    /// A message that is not for the request in hand: logged, and answered
    /// when it is a request of the worker's.
    pub(super) async fn skip(&mut self, message: Inbound, bytes: &[u8]) {
        match message {
            Inbound::Request { id, method, params } => {
                let framing = self.spec.framing;
                let result = self.spec.answers.result(framing, &method, params.as_ref());
                event!(
                    debug,
                    self,
                    method,
                    served = result.is_some(),
                    "worker sent a request"
                );
                let answer = rpc::answer(framing, &id, &method, result);
                // A closed pipe shows as the end of stdout, next read.
                let _ = self.write(&answer).await;
            }
            Inbound::NotRpc(why) => {
                event!(
                    warn,
                    self,
                    line = %excerpt(bytes),
                    why,
                    "worker wrote a message that is not JSON-RPC; skipped"
                );
            }
            _ => event!(
                debug,
                self,
                message = %excerpt(bytes),
                "skipped a message that is not for the request in hand"
            ),
        }
    }

    /// The request in hand has its reply.
    pub(super) fn settled(&mut self) {
        self.phase = Phase::Idle;
        self.open = None;
    }
}
