//! The faults a job is given: how often each comes, the request that
//! provokes it, and the judge of how the job ended.

use kennel::{Error, ExitStatus, RejectReason};
use kennel_process::ProcessError;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

use crate::{JOB_TIMEOUT, MAX_LINE};

/// What a job is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fault {
    None,
    Slow,
    Error,
    Crash,
    Garbage,
    Binary,
    Partial,
    Oversized,
    Overrun,
    Hang,
    Abandon,
    Grandchild,
}

impl Fault {
    /// Weights in thousandths.
    const MIX: [(Self, u32); 12] = [
        (Self::None, 690),
        (Self::Slow, 40),
        (Self::Error, 60),
        (Self::Crash, 50),
        (Self::Garbage, 30),
        (Self::Binary, 20),
        (Self::Partial, 20),
        (Self::Oversized, 20),
        (Self::Overrun, 15),
        (Self::Hang, 5),
        (Self::Abandon, 30),
        (Self::Grandchild, 20),
    ];

    pub(crate) fn draw(rng: &mut StdRng) -> Self {
        let mut roll = rng.random_range(0..1000);
        for (fault, weight) in Self::MIX {
            if roll < weight {
                return fault;
            }
            roll -= weight;
        }
        Self::None
    }

    /// The request that provokes it; `n` makes each job's reply its own.
    pub(crate) fn request(self, n: u64, rng: &mut StdRng) -> Value {
        match self {
            Self::None | Self::Abandon => json!({"job": n}),
            Self::Slow => json!({"op": "sleep", "ms": rng.random_range(5..40)}),
            Self::Error => json!({"op": "error", "message": format!("chaos error {n}")}),
            Self::Crash => json!({"op": "crash", "code": 11}),
            Self::Garbage => json!({"op": "garbage"}),
            Self::Binary => {
                json!({"op": "raw", "bytes": [0xff, 0xfe, 0, b'x', b'\n'], "then": "serve"})
            }
            Self::Partial => {
                json!({"op": "raw", "bytes": b"{\"partial\":".to_vec(), "then": "exit", "code": 12})
            }
            Self::Oversized => json!({"op": "oversized", "bytes": MAX_LINE + 100}),
            Self::Overrun => json!({"op": "sleep", "ms": JOB_TIMEOUT.as_millis() as u64 + 400}),
            Self::Hang => json!({"op": "hang"}),
            Self::Grandchild => json!({"op": "grandchild"}),
        }
    }
}

pub(crate) type JobResult = Result<Result<Value, ProcessError>, Error>;

/// How a job ended, as the soak counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ending {
    /// The reply or the error its fault asks for.
    AsAsked,
    /// The worker started for it failed its warm-up.
    WarmupFailed,
    /// Turned away: the queue was full.
    Rejected,
    /// The worker it got had just exited while idle (code 9).
    IdleExit,
    /// The client gave up on it on purpose.
    Abandoned,
}

fn crash_status(r: &JobResult) -> Option<Option<ExitStatus>> {
    match r {
        Ok(Err(ProcessError::Crashed { status, .. })) => Some(status.clone()),
        Err(Error::Crashed { exit, .. }) => Some(exit.as_ref().map(|e| e.status.clone())),
        _ => None,
    }
}

/// Checks a job's result against its fault; `Err` says what is wrong.
pub(crate) fn judge(fault: Fault, request: &Value, r: &JobResult) -> Result<Ending, String> {
    // Collateral endings, possible whatever the fault.
    match r {
        Err(Error::WarmupFailed { .. }) => return Ok(Ending::WarmupFailed),
        Err(Error::Rejected {
            reason: RejectReason::QueueFull,
        }) => return Ok(Ending::Rejected),
        _ => {}
    }
    if crash_status(r) == Some(Some(ExitStatus::Code(9))) {
        return Ok(Ending::IdleExit);
    }
    let fits = match fault {
        Fault::None | Fault::Abandon => matches!(r, Ok(Ok(v)) if v == request),
        Fault::Slow => matches!(r, Ok(Ok(v)) if v["slept"] == request["ms"]),
        Fault::Grandchild => matches!(r, Ok(Ok(v)) if v["pid"].is_u64()),
        Fault::Error => {
            matches!(r, Ok(Err(ProcessError::Worker { message, .. })) if *message == request["message"])
        }
        Fault::Crash => matches!(crash_status(r), Some(None | Some(ExitStatus::Code(11)))),
        Fault::Partial => matches!(crash_status(r), Some(None | Some(ExitStatus::Code(12)))),
        Fault::Garbage | Fault::Binary | Fault::Oversized => {
            matches!(r, Ok(Err(ProcessError::Protocol { .. })))
                || matches!(crash_status(r), Some(None | Some(ExitStatus::Signal(9))))
        }
        Fault::Overrun | Fault::Hang => {
            matches!(r, Err(Error::Timeout { after }) if *after == JOB_TIMEOUT)
        }
    };
    if fits {
        Ok(Ending::AsAsked)
    } else {
        Err(format!("{fault:?} job {request} ended {r:?}"))
    }
}
