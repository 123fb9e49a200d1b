//! The framings against real child processes: the Python SDK's test worker
//! (`sdk/python/tests/worker.py`, one program for every framing) and small
//! workers in `tests/workers/` that misbehave on purpose. Replies matched by
//! id, the handshake as warm-up, cancel that keeps the worker and cancel
//! that ends in a kill, progress in order then the reply, error fields,
//! replies as written.

mod common;

use std::time::Duration;

use common::{FIXTURE, assert_group_ends, within};
use kennel::{CancelOutcome, Event, Fixed, Parallel, RetireReason};
use kennel_process::{
    CallStreaming, Coprocess, CoprocessSpec, Framing, Handshake, ProcessError, Progress, Streamed,
};
use serde_json::{Value, json};

const SDK_WORKER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../sdk/python/tests/worker.py"
);
const COUNT_SDK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/workers/count_sdk.py"
);
const SDK_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sdk/python");

fn workers(name: &str) -> String {
    format!("{}/tests/workers/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The SDK's test worker in `framing`, cancel lines on in JSON lines.
fn sdk(framing: Framing) -> CoprocessSpec {
    CoprocessSpec::new(["python3", SDK_WORKER])
        .env("KENNEL_FRAMING", framing.as_str())
        .framing(framing)
        .cancel_lines(true)
}

/// A job for the SDK worker: `op` with `params`, in the framing's shape.
fn job(framing: Framing, op: &str, params: Value) -> Value {
    if framing.is_rpc() {
        json!({"method": op, "params": params})
    } else {
        let mut params = params;
        params["op"] = op.into();
        params
    }
}

fn pid_of(reply: &Value) -> u64 {
    reply["pid"].as_u64().expect("a pid")
}

#[tokio::test]
async fn each_framing_carries_a_request_and_its_reply() {
    for framing in Framing::ALL {
        let mut w = sdk(framing).spawn().unwrap();
        within("ready", w.ready()).await.unwrap();
        let reply = within(
            "echo",
            w.request(&job(framing, "echo", json!({"text": "héllo"}))),
        )
        .await
        .unwrap();
        assert_eq!(reply["text"], "héllo", "{framing}");
        w.close().await;
    }
}

#[tokio::test]
async fn the_mcp_handshake_is_the_warm_up_and_its_failure_fails_it() {
    for framing in [Framing::JsonRpc, Framing::ContentLength] {
        let mut w = sdk(framing)
            .handshake(Handshake::mcp().client_info("kennel-tests", "1"))
            .spawn()
            .unwrap();
        within("handshake", w.ready()).await.unwrap();
        let result: Value = serde_json::from_str(w.handshake_result().unwrap().get()).unwrap();
        assert_eq!(result["serverInfo"]["name"], "test-worker", "{framing}");
        assert_eq!(result["protocolVersion"], "2025-11-25");
        assert_eq!(result["model"], "tiny", "what load() returned came with it");
        let pid = pid_of(
            &within("pid", w.request(&job(framing, "pid", json!({}))))
                .await
                .unwrap(),
        );
        assert_eq!(pid, u64::from(w.pid()));
        w.close().await;

        let mut failing = sdk(framing)
            .env("TEST_LOAD_FAILS", "1")
            .handshake(Handshake::mcp())
            .spawn()
            .unwrap();
        let err = within("failed handshake", failing.ready())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ProcessError::NotReady { reason, .. } if reason.contains("no model here")),
            "{framing}: {err}"
        );
        assert_group_ends(failing.pid()).await;
    }
}

#[tokio::test]
async fn replies_are_matched_by_id_whatever_unasked_or_duplicate_lines_the_worker_writes() {
    for framing in [Framing::JsonRpc, Framing::ContentLength] {
        let mut w = CoprocessSpec::new([
            "python3".to_owned(),
            workers("rpc_noisy.py"),
            framing.to_string(),
        ])
        .framing(framing)
        .spawn()
        .unwrap();
        let mut wrong = 0;
        for n in 0..1_000 {
            let reply = within(
                "reply",
                w.request(&json!({"method": "n", "params": {"n": n}})),
            )
            .await
            .unwrap();
            if reply != json!({"n": n}) {
                wrong += 1;
            }
        }
        assert_eq!(wrong, 0, "{framing}: replies taken from another request");
        w.close().await;
    }
}

#[tokio::test]
async fn a_second_ready_line_in_json_lines_is_never_taken_as_a_reply() {
    // The race of a worker that says it is ready twice: the extra line is
    // either waiting when the request is sent, or comes where the reply is
    // due; both are protocol errors, never another request's reply.
    let mut wrong = 0;
    let mut caught = 0;
    let tries = 1_000;
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..tries {
        tasks.spawn(async move {
            let mut w = CoprocessSpec::new([FIXTURE, "--ready-twice"])
                .spawn()
                .unwrap();
            within("ready", w.ready()).await.unwrap();
            let result = within("reply", w.request(&json!({"n": n}))).await;
            drop(w);
            (n, result)
        });
        if tasks.len() >= 8 {
            let (n, result) = tasks.join_next().await.unwrap().unwrap();
            match result {
                Ok(reply) if reply != json!({"n": n}) => wrong += 1,
                Ok(_) => {}
                Err(ProcessError::Protocol { .. }) => caught += 1,
                Err(other) => panic!("{other}"),
            }
        }
    }
    while let Some(done) = tasks.join_next().await {
        let (n, result) = done.unwrap();
        match result {
            Ok(reply) if reply != json!({"n": n}) => wrong += 1,
            Ok(_) => {}
            Err(ProcessError::Protocol { .. }) => caught += 1,
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(wrong, 0, "replies taken from a ready line");
    assert_eq!(caught, tries, "every second ready line was seen");
}

#[tokio::test]
async fn a_cancel_that_the_worker_answers_keeps_it_and_the_same_pid_serves_the_next_job() {
    for framing in Framing::ALL {
        let mut w = sdk(framing).spawn().unwrap();
        within("ready", w.ready()).await.unwrap();
        assert!(w.can_cancel(), "{framing}");
        let spin = job(framing, "spin", json!({}));
        // The request is dropped while the worker spins (for 30 s).
        let dropped = tokio::time::timeout(Duration::from_millis(300), w.request(&spin)).await;
        assert!(dropped.is_err(), "{framing}");
        let outcome = within("cancel", w.cancel(Duration::from_secs(5))).await;
        assert_eq!(outcome, CancelOutcome::Kept, "{framing}");
        let pid = pid_of(
            &within("pid", w.request(&job(framing, "pid", json!({}))))
                .await
                .unwrap(),
        );
        assert_eq!(pid, u64::from(w.pid()), "{framing}: the same process");
        w.close().await;
    }
}

#[tokio::test]
async fn a_cancel_that_gets_no_answer_within_the_grace_ends_in_a_kill() {
    for framing in Framing::ALL {
        let mut w = CoprocessSpec::new([
            "python3".to_owned(),
            workers("stubborn.py"),
            framing.to_string(),
        ])
        .framing(framing)
        .cancel_lines(true)
        .spawn()
        .unwrap();
        within("ready", w.ready()).await.unwrap();
        let dropped = tokio::time::timeout(
            Duration::from_millis(200),
            w.request(&json!({"method": "m"})),
        )
        .await;
        assert!(dropped.is_err());
        let outcome = within("cancel", w.cancel(Duration::from_millis(300))).await;
        assert_eq!(outcome, CancelOutcome::Killed, "{framing}");
        assert_group_ends(w.pid()).await;
        assert!(matches!(
            w.request(&json!({"method": "m"})).await,
            Err(ProcessError::Crashed { .. })
        ));
    }
}

#[tokio::test]
async fn json_lines_without_cancel_lines_cannot_cancel_and_a_dropped_request_kills() {
    let mut w = sdk(Framing::JsonLines).cancel_lines(false).spawn().unwrap();
    within("ready", w.ready()).await.unwrap();
    assert!(!w.can_cancel());
    let _ = tokio::time::timeout(
        Duration::from_millis(200),
        w.request(&json!({"op": "spin"})),
    )
    .await;
    assert_group_ends(w.pid()).await;
}

#[tokio::test]
async fn a_pool_cancels_a_timed_out_job_keeps_the_worker_and_says_so() {
    for framing in Framing::ALL {
        let pool = sdk(framing)
            .pool()
            .name("cancel")
            .startup(Parallel)
            .sizing(Fixed(1))
            .with_options(|o| {
                o.job_timeout = Some(Duration::from_secs(3));
                o.cancel_grace = Duration::from_secs(5);
            })
            .build()
            .unwrap();
        let mut events = pool.events();
        let pid =
            |r: Result<Result<Value, ProcessError>, kennel::Error>| pid_of(&r.unwrap().unwrap());
        let first = pid(pool
            .run(async |w: &mut Coprocess| w.request(&job(framing, "pid", json!({}))).await)
            .await);
        let err = pool
            .run(async |w: &mut Coprocess| w.request(&job(framing, "spin", json!({}))).await)
            .await
            .unwrap_err();
        assert!(
            matches!(err, kennel::Error::Timeout { .. }),
            "{framing}: {err}"
        );
        let outcome = within("job:cancelled", async {
            loop {
                if let Event::Cancelled {
                    reason, outcome, ..
                } = events.recv().await.unwrap()
                {
                    return (reason, outcome);
                }
            }
        })
        .await;
        assert_eq!(
            outcome,
            (RetireReason::Timeout, CancelOutcome::Kept),
            "{framing}"
        );
        let next = pid(pool
            .run(async |w: &mut Coprocess| w.request(&job(framing, "pid", json!({}))).await)
            .await);
        assert_eq!(next, first, "{framing}: the same worker after the cancel");
        pool.close().await;
    }
}

#[tokio::test]
async fn progress_comes_in_order_then_the_reply() {
    for framing in Framing::ALL {
        let mut w = sdk(framing).spawn().unwrap();
        within("ready", w.ready()).await.unwrap();
        let mut seen = Vec::new();
        let reply = within(
            "progress",
            w.request_with_progress(&job(framing, "progress", json!({"steps": 5})), |p| {
                seen.push(p);
            }),
        )
        .await
        .unwrap();
        let steps: Vec<Value> = seen.iter().map(|p: &Progress| p.progress.clone()).collect();
        assert_eq!(steps, [1, 2, 3, 4, 5].map(Value::from), "{framing}");
        assert_eq!(seen[2].message.as_deref(), Some("step 3"));
        assert_eq!(seen[2].total, Some(json!(5)));
        assert_eq!(reply.get(), r#"{"done":true}"#);
        w.close().await;
    }
}

#[tokio::test]
async fn a_streaming_call_yields_the_progress_then_the_reply_last() {
    let pool = sdk(Framing::JsonRpc)
        .pool()
        .startup(Parallel)
        .sizing(Fixed(1))
        .build()
        .unwrap();
    let stream = pool.call_streaming(json!({"method": "progress", "params": {"steps": 4}}));
    let mut stream = std::pin::pin!(stream);
    let mut items = Vec::new();
    while let Some(item) = within(
        "stream",
        std::future::poll_fn(|cx| futures_core::Stream::poll_next(stream.as_mut(), cx)),
    )
    .await
    {
        items.push(match item {
            Streamed::Progress(p) => p.to_json(),
            Streamed::Reply(reply) => serde_json::from_str(reply.unwrap().get()).unwrap(),
        });
    }
    assert_eq!(items.len(), 5);
    assert_eq!(items[0]["progress"], 1);
    assert_eq!(items[3]["progress"], 4);
    assert_eq!(items[4], json!({"done": true}));
    pool.close().await;
}

#[tokio::test]
async fn a_progress_heartbeat_extends_the_deadline_and_silence_does_not() {
    // count_sdk.py reports each step: 8 steps of 0.3 s, 2.4 s in all,
    // against a job_timeout of 1.5 s.
    let run = |extends: bool| async move {
        let pool = CoprocessSpec::new(["python3", COUNT_SDK])
            .env("PYTHONPATH", SDK_PATH)
            .cancel_lines(true)
            .pool()
            .startup(Parallel)
            .sizing(Fixed(1))
            .with_options(|o| {
                o.job_timeout = Some(Duration::from_millis(1_500));
                o.progress_extends_timeout = extends;
            })
            .build()
            .unwrap();
        let r = pool
            .run(async |w: &mut Coprocess| w.request(&json!({"to": 8, "step_seconds": 0.3})).await)
            .await;
        pool.close().await;
        r
    };
    let reply = within("beating job", run(true)).await.unwrap().unwrap();
    assert_eq!(reply, json!({"counted": 8}));
    let err = within("quiet deadline", run(false)).await.unwrap_err();
    assert!(matches!(err, kennel::Error::Timeout { .. }), "{err}");
}

#[tokio::test]
async fn a_worker_error_keeps_its_status_and_fields_in_every_framing() {
    for framing in Framing::ALL {
        let mut w = sdk(framing).spawn().unwrap();
        within("ready", w.ready()).await.unwrap();
        let err = within("error", w.request(&job(framing, "error", json!({}))))
            .await
            .unwrap_err();
        let ProcessError::Worker {
            message,
            fields,
            rpc_code,
        } = &err
        else {
            panic!("{framing}: {err}");
        };
        assert_eq!(message, "text is too long");
        assert_eq!(
            Value::Object(fields.clone()),
            json!({"status": 422, "code": "too_long", "limit": 5})
        );
        assert_eq!(err.status(), Some(422));
        assert_eq!(*rpc_code, framing.is_rpc().then_some(-32000), "{framing}");
        // Still usable.
        within("echo", w.request(&job(framing, "echo", json!({}))))
            .await
            .unwrap();
        w.close().await;
    }
}

#[tokio::test]
async fn a_reply_comes_back_as_the_worker_wrote_it() {
    for framing in [Framing::JsonLines, Framing::JsonRpc] {
        let mut w = CoprocessSpec::new([
            "python3".to_owned(),
            workers("verbatim.py"),
            framing.to_string(),
        ])
        .framing(framing)
        .method("any")
        .spawn()
        .unwrap();
        let raw = within("raw", w.request_raw(&json!({}))).await.unwrap();
        assert_eq!(
            raw.get(),
            r#"{"zeta": 1,  "alpha": [1.50, 2E3, "\u00e9"], "mid": {"b": null, "a": true}}"#,
            "{framing}"
        );
        w.close().await;
    }
}

#[tokio::test]
async fn a_json_rpc_job_that_is_not_a_call_is_refused_and_the_worker_stays() {
    let mut w = sdk(Framing::JsonRpc).spawn().unwrap();
    let err = w.request(&json!({"text": "no method"})).await.unwrap_err();
    assert!(matches!(err, ProcessError::NotACall { .. }), "{err}");
    assert!(err.worker_is_usable());
    within(
        "echo",
        w.request(&json!({"method": "echo", "params": {"a": 1}})),
    )
    .await
    .unwrap();
    w.close().await;
}
