//! A language server nobody here wrote, pooled by the real `kennel serve`:
//! pyright (`pyright@1.1.414` from npm, in `target/lsp-node`, which
//! `.ci/run` installs; no network at test time), one worker in the
//! `content-length` framing. Through `POST /pools/{name}/jobs`: a
//! notification job (`Kennel-Notify: true`) opens an unsaved buffer and is
//! answered 202, a hover on it names the buffer's symbol, and the worker's
//! `workspace/configuration` requests are answered from the pool's
//! `settings` (a module found only through `python.analysis.extraPaths`).
//! Without pyright the test fails, naming it, unless `KENNEL_ALLOW_SKIP=1`.

mod served;
mod support;

use std::path::PathBuf;

use serde_json::{Value, json};
use served::{Server, Stderr};

fn pyright() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/lsp-node/node_modules/.bin/pyright-langserver");
    let note = format!(
        "npm install --prefix target/lsp-node pyright@1.1.414 (looked for {})",
        path.display()
    );
    let test = std::thread::current().name().unwrap_or("lsp").to_owned();
    support::outside::needed(
        &test,
        "pyright (npm)",
        &note,
        Some(path).filter(|p| p.exists()),
    )
}

/// The unsaved buffer: a symbol of its own, and one imported from a module
/// that only the settings' `extraPaths` make findable.
const BUFFER: &str = "from kennel_extra import kennel_imported\n\ndef kennel_symbol(x: int) -> str: ...\n\nkennel_symbol(1)\nkennel_imported(b'')\n";

fn config(program: &str) -> String {
    format!(
        r#"[server]
listen = "127.0.0.1:0"

[[pool]]
name = "py"
argv = ["{program}", "--stdio"]
protocol = "content-length"
sizing = {{ kind = "fixed", workers = 1 }}
settings = {{ python = {{ analysis = {{ extraPaths = ["{{dir}}/extra"] }} }} }}

[pool.initialize]
params = {{ rootUri = "file://{{dir}}/root", workspaceFolders = [{{ uri = "file://{{dir}}/root", name = "root" }}], capabilities = {{ workspace = {{ configuration = true, workspaceFolders = true }} }} }}
"#
    )
}

/// The text of a hover reply (`{"contents": {"value": ...}}`).
fn hover_text(reply: &Value) -> String {
    reply["contents"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_notification_job_opens_an_unsaved_buffer_and_a_hover_reads_it_with_the_pools_settings() {
    let Some(program) = pyright() else { return };
    let server = Server::start(
        "lsp-route",
        &config(&program.display().to_string()),
        &[],
        &[],
        Stderr::Collected,
    );
    let dir = server.dir.0.clone();
    std::fs::create_dir_all(dir.join("root")).unwrap();
    std::fs::create_dir_all(dir.join("extra")).unwrap();
    std::fs::write(
        dir.join("extra/kennel_extra.py"),
        "def kennel_imported(y: bytes) -> float: ...\n",
    )
    .unwrap();
    // Never written to disk: pyright knows it only from the notification.
    let file = format!("file://{}", dir.join("root/unsaved.py").display());

    let open = json!({"method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": file, "languageId": "python", "version": 1, "text": BUFFER,
    }}});
    let notify = [("Kennel-Notify", "true")];
    let a = server.http("POST", "/pools/py/jobs", &notify, &open.to_string());
    assert_eq!(a.status, 202, "{}", a.body);
    assert_eq!(a.body, "", "a notification has no reply");

    let hover = |line: u32, character: u32| {
        let job = json!({"method": "textDocument/hover", "params": {
            "textDocument": {"uri": file},
            "position": {"line": line, "character": character},
        }});
        let a = server.http("POST", "/pools/py/jobs", &[], &job.to_string());
        assert_eq!(a.status, 200, "{}", a.body);
        hover_text(&a.json())
    };
    let own = hover(2, 5);
    assert!(
        own.contains("kennel_symbol") && own.contains("(x: int) -> str"),
        "{own:?}"
    );
    let imported = hover(5, 3);
    assert!(
        imported.contains("kennel_imported") && imported.contains("(y: bytes) -> float"),
        "extraPaths came from the pool's settings: {imported:?}"
    );
    // Stopped, the server ends the language server with LSP's shutdown
    // and exit (dropped, it would be killed, and leave its files behind).
    let log = server.log();
    assert!(server.stop(), "{log}");
}

#[test]
fn settings_and_answers_are_refused_for_json_lines_and_settings_must_be_a_table() {
    for (extra, key, says) in [
        ("settings = { a = 1 }", "settings", "JSON-RPC"),
        (
            "answers = { \"roots/list\" = { roots = [] } }",
            "answers",
            "JSON-RPC",
        ),
        (
            "protocol = \"json-rpc\"\nsettings = 3",
            "settings",
            "not a table",
        ),
    ] {
        let text = format!("[[pool]]\nname = \"p\"\nargv = [\"x\"]\n{extra}\n");
        let source = kennel_server::Source::inline("test.toml");
        let err = kennel_server::Config::parse(&text, &source)
            .unwrap_err()
            .to_string();
        assert!(err.contains(key) && err.contains(says), "{extra}: {err}");
    }
}
