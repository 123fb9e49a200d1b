//! Language servers: notification jobs, the worker's requests answered
//! from the spec, the LSP handshake and `shutdown` then `exit` at close,
//! first with a small server of ours (`tests/workers/lsp_small.py`), then
//! with a real one in a pool: pyright (`pyright@1.1.414` from npm,
//! installed into `target/lsp-node` by `.ci/run`; no network at test
//! time), in the `content-length` framing with the LSP handshake. A
//! notification job opens an unsaved buffer, a hover on it names its
//! symbol, `workspace/configuration` is answered from the spec's settings,
//! and at close pyright gets `shutdown` then `exit` and exits 0; two
//! pyrights keyed by workspace answer each hover from the one that opened
//! its document. Without pyright the test fails, naming it, unless
//! `KENNEL_ALLOW_SKIP=1`.

mod common;

#[allow(unreachable_pub)]
#[path = "../../kennel-server/tests/support/outside.rs"]
mod outside;

use std::path::{Path, PathBuf};

use common::within;
use kennel::{ExitStatus, Fixed, Key, RunOptions};
use kennel_process::{Coprocess, CoprocessSpec, Framing, Handshake, JsonBytes, ProcessError};
use serde_json::{Value, json};

fn small(framing: Framing) -> CoprocessSpec {
    let program = format!("{}/tests/workers/lsp_small.py", env!("CARGO_MANIFEST_DIR"));
    CoprocessSpec::new(["python3", &program, framing.as_str()])
        .framing(framing)
        .handshake(Handshake::for_framing(framing))
}

#[tokio::test]
async fn a_notification_job_is_written_and_awaits_no_reply() {
    for framing in [Framing::JsonRpc, Framing::ContentLength] {
        let mut w = small(framing).spawn().unwrap();
        // Before the warm-up: it waits for the handshake first.
        let opened = json!({"textDocument": {"uri": "file:///nowhere/a.py", "text": "x = 1"}});
        within("didOpen", w.notify("textDocument/didOpen", Some(&opened)))
            .await
            .unwrap();
        let bare = JsonBytes::new(br#"{"method": "bare"}"#.as_slice()).unwrap();
        within("bare", w.notify_bytes(&bare)).await.unwrap();
        let not_one = JsonBytes::new(br#"{"method": "x", "id": 1}"#.as_slice()).unwrap();
        let err = within("not a note", w.notify_bytes(&not_one))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ProcessError::NotACall { .. }),
            "{framing}: {err}"
        );
        let notes = within("notes", w.request(&json!({"method": "notes"})))
            .await
            .unwrap();
        let initialized = Handshake::default_initialized(framing);
        assert_eq!(
            notes,
            json!([
                [initialized, {}],
                ["textDocument/didOpen", opened],
                ["bare", null]
            ]),
            "{framing}"
        );
        w.close().await;
    }
    let mut lines = CoprocessSpec::new(["cat"])
        .ready(kennel_process::ReadyMode::Immediate)
        .spawn()
        .unwrap();
    let err = lines.notify("x", None).await.unwrap_err();
    assert!(matches!(err, ProcessError::NotACall { .. }), "{err}");
    lines.close().await;
}

#[tokio::test]
async fn the_workers_requests_are_answered_from_the_spec_and_the_rest_not_found() {
    let settings = json!({"python": {"analysis": {"extraPaths": ["/x"]}}});
    let requests = json!({"requests": [
        ["workspace/configuration", {"items": [
            {"section": "python.analysis"}, {"section": "python.venv"}, {},
        ]}],
        ["client/registerCapability", {"registrations": []}],
        ["window/workDoneProgress/create", {"token": "t"}],
        ["ping", null],
        ["roots/list", null],
        ["sampling/createMessage", {}],
    ]});
    let mut w = small(Framing::ContentLength)
        .settings(settings.clone())
        .answer("roots/list", json!({"roots": []}))
        .spawn()
        .unwrap();
    let answers = within(
        "ask",
        w.request(&json!({"method": "ask", "params": requests})),
    )
    .await
    .unwrap();
    let not_found = |method: &str| json!({"error": {"code": -32601, "message": format!("kennel does not serve {method:?}")}});
    assert_eq!(
        answers,
        json!([
            {"result": [{"extraPaths": ["/x"]}, null, settings]},
            {"result": null},
            {"result": null},
            {"result": {}},
            {"result": {"roots": []}},
            not_found("sampling/createMessage"),
        ])
    );
    w.close().await;

    // An MCP server (json-rpc) without settings or answers.
    let mut w = small(Framing::JsonRpc).spawn().unwrap();
    let answers = within(
        "ask",
        w.request(&json!({"method": "ask", "params": requests})),
    )
    .await
    .unwrap();
    assert_eq!(answers[0], not_found("workspace/configuration"));
    assert_eq!(answers[1], not_found("client/registerCapability"));
    assert_eq!(answers[3], json!({"result": {}}));
    w.close().await;
}

#[tokio::test]
async fn the_lsp_handshake_carries_kennels_pid_and_close_sends_shutdown_then_exit() {
    let mut w = small(Framing::ContentLength).spawn().unwrap();
    within("ready", w.ready()).await.unwrap();
    let sent: Value = serde_json::from_str(w.handshake_result().unwrap().get()).unwrap();
    assert_eq!(sent["processId"], std::process::id());
    assert_eq!(sent["rootUri"], Value::Null);
    let exit = within("close", w.close()).await;
    assert_eq!(exit.status, ExitStatus::Code(0), "exit came after shutdown");

    let own = Handshake::custom(json!({"processId": 7}), Some("initialized".into()));
    let mut w = small(Framing::ContentLength)
        .handshake(own)
        .spawn()
        .unwrap();
    within("ready", w.ready()).await.unwrap();
    let sent: Value = serde_json::from_str(w.handshake_result().unwrap().get()).unwrap();
    assert_eq!(sent["processId"], 7, "a pid of the config's own is kept");
    w.close().await;

    // json-rpc (MCP) gets no processId, no shutdown: its stdin just ends.
    let mut w = small(Framing::JsonRpc).spawn().unwrap();
    within("ready", w.ready()).await.unwrap();
    let sent: Value = serde_json::from_str(w.handshake_result().unwrap().get()).unwrap();
    assert!(sent.get("processId").is_none(), "{sent}");
    let exit = within("close", w.close()).await;
    assert_eq!(exit.status, ExitStatus::Code(3));
}

#[tokio::test]
async fn a_server_that_never_answers_shutdown_is_closed_after_the_grace() {
    let grace = std::time::Duration::from_millis(200);
    let w = CoprocessSpec::new(["sleep", "60"])
        .framing(Framing::ContentLength)
        .close_grace(grace)
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let exit = within("close", w.close()).await;
    // shutdown unanswered (one grace), stdin closed (another), SIGTERM.
    assert_eq!(exit.status, ExitStatus::Signal(15));
    assert!(started.elapsed() >= grace * 2, "{:?}", started.elapsed());
}

fn pyright() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/lsp-node/node_modules/.bin/pyright-langserver");
    let test = std::thread::current().name().unwrap_or("lsp").to_owned();
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

/// A fresh directory of this test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("kennel-lsp-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temp dir");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The unsaved buffer: a symbol of its own, and one imported from a
/// module that only `python.analysis.extraPaths` makes findable.
const BUFFER: &str = "from kennel_extra import kennel_imported\n\
                      \n\
                      def kennel_symbol(x: int) -> str: ...\n\
                      \n\
                      kennel_symbol(1)\n\
                      kennel_imported(b'')\n";

/// A pool of one pyright on the workspace `root`, with `settings` (if any)
/// for its `workspace/configuration` requests.
fn spec(program: &Path, root: &Path, settings: Option<Value>) -> CoprocessSpec {
    let handshake = Handshake::lsp()
        .param("rootUri", json!(uri(root)))
        .param(
            "workspaceFolders",
            json!([{"uri": uri(root), "name": "kennel-test"}]),
        )
        .capabilities(json!({"workspace": {"configuration": true, "workspaceFolders": true}}));
    let spec = CoprocessSpec::new([program.as_os_str(), "--stdio".as_ref()])
        .framing(Framing::ContentLength)
        .handshake(handshake);
    match settings {
        Some(settings) => spec.settings(settings),
        None => spec,
    }
}

/// The plain text of a hover reply's contents.
fn hover_text(reply: &Value) -> String {
    match &reply["contents"] {
        Value::String(text) => text.clone(),
        Value::Object(markup) => markup["value"].as_str().unwrap_or_default().to_owned(),
        other => other.to_string(),
    }
}

/// Opens the unsaved buffer `file` with a notification job, then hovers
/// on the buffer's own symbol (line 2) and the imported one (line 5):
/// their texts.
async fn open_and_hover(worker: &mut Coprocess, file: &str) -> (String, String) {
    let open = json!({"method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": file, "languageId": "python", "version": 1, "text": BUFFER,
    }}});
    let open = JsonBytes::new(open.to_string().into_bytes()).unwrap();
    within("didOpen", worker.notify_bytes(&open))
        .await
        .expect("didOpen written");
    let hover = |line: u32, character: u32| {
        json!({"method": "textDocument/hover", "params": {
            "textDocument": {"uri": file},
            "position": {"line": line, "character": character},
        }})
    };
    let own = within("hover", worker.request(&hover(2, 5)))
        .await
        .expect("a hover reply");
    let imported = within("hover", worker.request(&hover(5, 3)))
        .await
        .expect("a hover reply");
    (hover_text(&own), hover_text(&imported))
}

/// Runs one pool of pyright through a didOpen and two hovers, closes it,
/// and returns the hover texts and how pyright ended.
async fn session(spec: CoprocessSpec, file: &str) -> (String, String, ExitStatus) {
    let pool = spec
        .pool()
        .name("pyright")
        .sizing(Fixed(1))
        .build()
        .expect("a pool");
    let mut lease = within("a warm pyright", pool.lend())
        .await
        .expect("pyright warms up");
    let worker: &mut Coprocess = &mut lease;
    let exited = worker.exited();
    let (own, imported) = open_and_hover(worker, file).await;
    drop(lease);
    within("close", pool.close()).await;
    let exit = within("pyright's exit", exited).await;
    (own, imported, exit.status)
}

#[tokio::test]
async fn pyright_hovers_on_an_unsaved_buffer_reads_the_settings_and_exits_0() {
    let Some(program) = pyright() else { return };
    let root = TempDir::new("root");
    let extra = TempDir::new("extra");
    std::fs::write(
        extra.0.join("kennel_extra.py"),
        "def kennel_imported(y: bytes) -> float: ...\n",
    )
    .unwrap();
    // Never written to disk: pyright knows it only from didOpen.
    let file = uri(&root.0.join("unsaved.py"));
    assert!(!root.0.join("unsaved.py").exists());

    let settings = json!({"python": {"analysis": {
        "extraPaths": [extra.0.display().to_string()],
    }}});
    let (own, imported, status) = session(spec(&program, &root.0, Some(settings)), &file).await;
    assert!(
        own.contains("kennel_symbol") && own.contains("(x: int) -> str"),
        "the hover names the buffer's symbol: {own:?}"
    );
    assert!(
        imported.contains("kennel_imported") && imported.contains("(y: bytes) -> float"),
        "extraPaths came from the settings: {imported:?}"
    );
    assert_eq!(
        status,
        ExitStatus::Code(0),
        "pyright exits 0 on shutdown and exit"
    );

    // The same without settings: pyright's configuration request gets
    // -32601, so it never learns of the extra path.
    let (own, imported, status) = session(spec(&program, &root.0, None), &file).await;
    assert!(own.contains("kennel_symbol"), "{own:?}");
    assert!(
        !imported.contains("-> float"),
        "without settings the module is not found: {imported:?}"
    );
    assert_eq!(status, ExitStatus::Code(0));
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
