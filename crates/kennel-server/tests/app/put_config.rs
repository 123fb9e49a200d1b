//! `PUT /pools/{name}/config` on a live pool: what it changes and the
//! actions it answers, bad bodies refused naming their key, `max_surge` and
//! its range, a merge patch of the live options.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::routed::{demo, state_with};
use crate::{assert_error, call, get, post, request};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_config_changes_a_live_pool() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let body = json!({
        "sizing": {"kind": "fixed", "workers": 2},
        "job_timeout": "5s",
        "eviction": {"kind": "idle-timeout", "after": "1m", "keep": 1},
        "group": "moved",
    });
    let (status, _, answer) = call(
        &router,
        request(Method::PUT, "/pools/demo/config", body.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["pool"], "demo");
    let actions: Vec<&str> = answer["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        actions
            .iter()
            .any(|a| a.contains("size 1 -> 2") || a.contains("capacity")),
        "{actions:?}"
    );
    assert!(actions.iter().any(|a| a.contains("moved")), "{actions:?}");
    let (_, _, stats) = call(&router, get("/pools/demo/stats")).await;
    assert_eq!(stats["size"], 2);
    let (_, _, pools) = call(&router, get("/pools")).await;
    assert_eq!(pools["pools"][0]["group"], "moved");
    let (status, _, _) = call(&router, post("/groups/moved/jobs", &json!({}))).await;
    assert_eq!(status, StatusCode::OK);

    // An unknown key or a bad value is 400, naming the key.
    let answer = call(
        &router,
        request(Method::PUT, "/pools/demo/config", r#"{"name":"x"}"#),
    )
    .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-config");
    assert!(
        answer.2["message"].as_str().unwrap().contains("name"),
        "{}",
        answer.2
    );
    let answer = call(
        &router,
        request(Method::PUT, "/pools/demo/config", r#"{"job_timeout":"0s"}"#),
    )
    .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-config");
    assert!(
        answer.2["message"]
            .as_str()
            .unwrap()
            .contains("job_timeout")
    );
    let answer = call(&router, request(Method::PUT, "/pools/demo/config", "{oops")).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-json");
    // Good JSON that is not an object is a bad config.
    let answer = call(&router, request(Method::PUT, "/pools/demo/config", "[1]")).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-config");
    assert_eq!(
        answer.2["message"],
        "the body is an array (allowed: a JSON object of the keys to change, such as {\"job_timeout\": \"10s\"})"
    );
    state.close().await;
}

/// `max_surge` is read from the body, shown by `GET /pools/{name}/config`,
/// refused out of its range with the key named, and the stats count the
/// replacements warming above the capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_config_sets_max_surge_and_refuses_one_out_of_range() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let (_, _, config) = call(&router, get("/pools/demo/config")).await;
    assert_eq!(config["max_surge"], 0);
    let (status, _, answer) = call(
        &router,
        request(Method::PUT, "/pools/demo/config", r#"{"max_surge":1}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (_, _, config) = call(&router, get("/pools/demo/config")).await;
    assert_eq!(config["max_surge"], 1);
    let answer = call(
        &router,
        request(Method::PUT, "/pools/demo/config", r#"{"max_surge":65}"#),
    )
    .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-config");
    let message = answer.2["message"].as_str().unwrap();
    assert!(
        message.contains("max_surge") && message.contains("0 to 64"),
        "{message}"
    );
    let (_, _, stats) = call(&router, get("/pools/demo/stats")).await;
    assert_eq!(stats["surging"], 0);
    state.close().await;
}

/// The body patches the live options: what it leaves out stays, `null`
/// sets an option back to its default, and an unchanged value is no action.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_config_is_a_merge_patch_of_the_live_options() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let put = async |body: &str| {
        let (status, _, answer) = call(
            &router,
            request(Method::PUT, "/pools/demo/config", body.to_owned()),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        answer["actions"].clone()
    };
    assert_eq!(
        put(r#"{"job_timeout":"5s","max_waiting":3}"#).await,
        json!(["set job_timeout", "set max_waiting"])
    );
    assert_eq!(
        put(r#"{"max_waiting":null,"job_timeout":"5s"}"#).await,
        json!(["set max_waiting"])
    );
    let options = state.pool("demo").unwrap().options();
    assert_eq!(options.job_timeout, Some(Duration::from_secs(5)));
    assert_eq!(options.max_waiting, None);
    state.close().await;
}

/// A rate option below its floor is refused at its key, the floor named,
/// and the live value stays: `memory_check_every` checks memory at most
/// every 100 ms, so a body cannot make the service poll it in a loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_config_refuses_memory_check_every_below_its_floor() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let (_, _, before) = call(&router, get("/pools/demo/config")).await;
    let answer = call(
        &router,
        request(
            Method::PUT,
            "/pools/demo/config",
            r#"{"memory_check_every":"1ns"}"#,
        ),
    )
    .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-config");
    let message = answer.2["message"].as_str().unwrap();
    assert!(
        message.contains("memory_check_every") && message.contains("at least 100ms"),
        "{message}"
    );
    let (_, _, after) = call(&router, get("/pools/demo/config")).await;
    assert_eq!(after["memory_check_every"], before["memory_check_every"]);
    state.close().await;
}
