//! What the hostile-input tests draw from: the number of cases of each
//! property, a runtime, and odd reconfiguration bodies. The service's
//! route tests (this folder) and the config parser's unit tests
//! (`src/config/tests/hostile_text.rs`, which includes this file by path)
//! share it.

use proptest::prelude::*;
use serde_json::{Value, json};

/// `PROPTEST_CASES`, else `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A runtime of two worker threads, for the properties that serve.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A JSON object with the keys of `PUT /pools/{name}/config` and odd values.
pub(crate) fn reconfig_json() -> impl Strategy<Value = Value> {
    let value = prop_oneof![
        Just(Value::Null),
        Just(json!("0s")),
        Just(json!("1ms")),
        Just(json!("-5s")),
        Just(json!("3000000 days")),
        Just(json!("2s")),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(1.5)),
        Just(json!(u64::MAX)),
        Just(json!({"kind": "fixed", "workers": 0})),
        Just(json!({"kind": "fixed", "workers": 3})),
        Just(json!({"kind": "fixed", "workers": 5000})),
        Just(json!({"kind": "resources", "memory_per_worker": "1B"})),
        Just(json!({"kind": "hill-climbing", "memory_per_worker": "1GiB"})),
        Just(json!({"kind": "gradient"})),
        Just(json!({"kind": "idle-timeout", "after": "1s", "keep": 1})),
        Just(json!({"kind": "idle-timeout", "after": "0s"})),
        Just(json!({"kind": "none"})),
        Just(json!("g")),
        Just(json!("bad group name!")),
        Just(json!([1, 2])),
        ".{0,10}".prop_map(Value::String),
    ];
    let key = prop_oneof![
        Just("sizing"),
        Just("eviction"),
        Just("job_timeout"),
        Just("warmup_timeout"),
        Just("max_waiting"),
        Just("max_queue_wait"),
        Just("max_lifetime"),
        Just("max_lifetime_jitter"),
        Just("auto_grow_threshold"),
        Just("job_grace"),
        Just("group"),
        Just("name"),
        Just("argv"),
        Just("unknown"),
    ];
    prop::collection::btree_map(key, value, 0..4)
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}
