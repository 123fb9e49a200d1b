//! [`CallStreaming::call_streaming`]: a job on a pool of coprocesses as a
//! `Stream` of its progress items, then its reply.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use kennel::{JobError, Pool};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use crate::coprocess::Coprocess;
use crate::error::ProcessError;
use crate::progress::Progress;

/// How many progress items may wait for the stream's reader; more are
/// dropped (the reply never is). The worker's pipe holds back a worker
/// that writes faster than the stream is read, so this bounds a burst.
pub const PROGRESS_BUFFER: usize = 256;

/// One item of a [`CallStream`].
#[derive(Debug)]
pub enum Streamed {
    /// A progress item of the running job, in the order the worker sent it.
    Progress(Progress),
    /// The job's end, always the last item: the reply as the worker wrote
    /// it, the worker's error, or the pool's.
    Reply(Result<Box<RawValue>, JobError<ProcessError>>),
}

type Job = Pin<Box<dyn Future<Output = Result<Box<RawValue>, JobError<ProcessError>>> + Send>>;

/// The stream of one job: its progress items as they come, then its reply.
/// Dropping it before the reply aborts the job: its worker is asked to
/// cancel (in a framing that can), or killed.
#[must_use = "a stream does nothing unless polled"]
pub struct CallStream {
    /// The job, until it has ended.
    job: Option<Job>,
    progress: mpsc::Receiver<Progress>,
    /// The job's end, until it is streamed.
    reply: Option<Result<Box<RawValue>, JobError<ProcessError>>>,
}

impl fmt::Debug for CallStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallStream")
            .field("running", &self.job.is_some())
            .finish_non_exhaustive()
    }
}

impl Stream for CallStream {
    type Item = Streamed;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Streamed>> {
        let me = &mut *self;
        if let Some(job) = &mut me.job {
            if let Poll::Ready(Some(p)) = me.progress.poll_recv(cx) {
                return Poll::Ready(Some(Streamed::Progress(p)));
            }
            me.reply = Some(std::task::ready!(job.as_mut().poll(cx)));
            me.job = None;
        }
        // The job ended: what progress it sent comes first, then the reply,
        // then nothing.
        if let Ok(p) = me.progress.try_recv() {
            return Poll::Ready(Some(Streamed::Progress(p)));
        }
        Poll::Ready(me.reply.take().map(Streamed::Reply))
    }
}

/// Streaming calls on a pool of coprocesses.
pub trait CallStreaming {
    /// Runs `request` as one job (as [`Coprocess::request_with_progress`])
    /// and streams its progress items, then its reply.
    ///
    /// ```no_run
    /// use kennel_process::{CallStreaming, CoprocessSpec, Streamed};
    /// use serde_json::json;
    ///
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// # let pool = CoprocessSpec::new(["python3", "examples/workers/count_sdk.py"]).pool().build()?;
    /// let mut stream = std::pin::pin!(pool.call_streaming(json!({"count": 3})));
    /// while let Some(item) = std::future::poll_fn(|cx| {
    ///     futures_core::Stream::poll_next(stream.as_mut(), cx)
    /// }).await {
    ///     match item {
    ///         Streamed::Progress(p) => println!("{}", p.to_json()),
    ///         Streamed::Reply(reply) => println!("{}", reply?.get()),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    fn call_streaming(&self, request: Value) -> CallStream;
}

impl CallStreaming for Pool<Coprocess> {
    fn call_streaming(&self, request: Value) -> CallStream {
        let (tx, rx) = mpsc::channel(PROGRESS_BUFFER);
        let pool = self.clone();
        let job = async move {
            pool.try_run(async move |w: &mut Coprocess| {
                w.request_with_progress(&request, |p| {
                    // Full: the reader is behind; this item is dropped.
                    let _ = tx.try_send(p);
                })
                .await
            })
            .await
        };
        CallStream {
            job: Some(Box::pin(job)),
            progress: rx,
            reply: None,
        }
    }
}
