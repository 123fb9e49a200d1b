//! Keyed jobs through a pool of real processes: a job reaches a worker that
//! holds its key's state (`examples/workers/keyed_sdk.py`, Python SDK
//! workers that load keys), and a language server pooled by workspace
//! (pyright from npm in `target/lsp-node`, installed by `.ci/run`; without
//! it the test fails, naming it, unless `KENNEL_ALLOW_SKIP=1`) answers a
//! hover on a document opened earlier under the same key.

#![cfg(target_os = "linux")]

mod common;

#[allow(unreachable_pub)]
#[path = "../../kennel-server/tests/support/outside.rs"]
mod outside;

use std::path::PathBuf;
use std::time::Duration;

use common::within;
use kennel::{Fixed, Key, RunOptions};
use kennel_process::{Coprocess, CoprocessSpec, Framing, Handshake, JsonBytes};
use serde_json::{Value, json};

const KEYED_SDK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/workers/keyed_sdk.py"
);
const SDK_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sdk/python");

#[tokio::test]
async fn a_thousand_jobs_of_four_keys_each_reach_a_worker_holding_their_keys_state() {
    let pool = CoprocessSpec::new(["python3", KEYED_SDK])
        .env("PYTHONPATH", SDK_PATH)
        .pool()
        .name("keyed")
        .sizing(Fixed(2))
        .with_options(|o| {
            // One key per worker, switched often: a short starvation bound
            // keeps the test quick.
            o.keys_per_worker = 1;
            o.max_key_wait = Duration::from_millis(2);
        })
        .build()
        .unwrap();
    let mut clients = Vec::new();
    for client in 0..8u64 {
        let pool = pool.clone();
        clients.push(tokio::spawn(async move {
            let mut wrong = Vec::new();
            // A small fixed walk over the keys, different per client.
            let mut x = client * 7 + 3;
            for _ in 0..125 {
                x = (x * 1_103_515_245 + 12_345) % 2_147_483_648;
                let k = ["a", "b", "c", "d"][(x >> 16) as usize % 4];
                let options = RunOptions::new().key(Key::new(k).unwrap());
                let reply = pool
                    .run_with(options, async |w: &mut Coprocess| {
                        w.request(&json!({"key": k})).await
                    })
                    .await
                    .expect("a worker")
                    .expect("a reply from a worker holding the key");
                if reply["key"] != k || reply["state"] != format!("model-{k}") {
                    wrong.push(reply);
                }
            }
            wrong
        }));
    }
    let mut wrong = Vec::new();
    for c in clients {
        wrong.extend(within("clients", c).await.unwrap());
    }
    assert!(
        wrong.is_empty(),
        "answered without their key's state: {wrong:?}"
    );
    let held: Vec<Vec<Key>> = pool.workers().into_iter().map(|r| r.keys).collect();
    assert!(held.iter().all(|k| k.len() <= 1), "{held:?}");
    within("close", pool.close()).await;
}

fn pyright() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/lsp-node/node_modules/.bin/pyright-langserver");
    let test = std::thread::current().name().unwrap_or("keyed").to_owned();
    let install = format!(
        "npm install --prefix target/lsp-node pyright@1.1.414 (looked for {})",
        path.display()
    );
    outside::needed(
        &test,
        "pyright (npm)",
        &install,
        Some(path).filter(|p| p.exists()),
    )
}

fn hover_text(reply: &Value) -> String {
    match &reply["contents"] {
        Value::String(text) => text.clone(),
        Value::Object(markup) => markup["value"].as_str().unwrap_or_default().to_owned(),
        other => other.to_string(),
    }
}

#[tokio::test]
async fn a_hover_goes_to_the_language_server_that_opened_its_document() {
    let Some(program) = pyright() else { return };
    let root = std::env::temp_dir().join(format!("kennel-keyed-lsp-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let root_uri = format!("file://{}", root.display());
    let handshake = Handshake::lsp().param("rootUri", json!(root_uri));
    // Two language servers; each workspace (key) lives on one of them: no
    // load method (the key only routes), room for two keys each, and one
    // worker per key, since a document is opened on one server only.
    let pool = CoprocessSpec::new([program.as_os_str(), "--stdio".as_ref()])
        .framing(Framing::ContentLength)
        .handshake(handshake)
        .pool()
        .name("pyright")
        .sizing(Fixed(2))
        .with_options(|o| {
            o.keys_per_worker = 2;
            o.max_workers_per_key = Some(1);
        })
        .build()
        .unwrap();
    let workspaces = ["w0", "w1", "w2", "w3"];
    let mut right = 0;
    for n in 0..100 {
        let ws = workspaces[(n * 7 + n / 4) % 4];
        let key = RunOptions::new().key(Key::new(ws).unwrap());
        let file = format!("{root_uri}/{ws}/unsaved.py");
        if n < 4 {
            // Open the workspace's document under its key (a notification).
            let open = json!({"method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": file, "languageId": "python", "version": 1,
                "text": format!("def symbol_of_{ws}(x: int) -> str: ...\n"),
            }}});
            let open = JsonBytes::new(open.to_string().into_bytes()).unwrap();
            pool.run_with(key.clone(), async |w: &mut Coprocess| {
                w.notify_bytes(&open).await
            })
            .await
            .unwrap()
            .unwrap();
        }
        let hover = json!({"method": "textDocument/hover", "params": {
            "textDocument": {"uri": file}, "position": {"line": 0, "character": 6},
        }});
        let reply = within(
            "hover",
            pool.run_with(key, async |w: &mut Coprocess| w.request(&hover).await),
        )
        .await
        .unwrap()
        .unwrap();
        if hover_text(&reply).contains(&format!("symbol_of_{ws}")) {
            right += 1;
        }
    }
    assert_eq!(right, 100, "hovers answered right");
    within("close", pool.close()).await;
    let _ = std::fs::remove_dir_all(&root);
}
