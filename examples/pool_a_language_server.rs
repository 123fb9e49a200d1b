//! Pool a language server nobody here wrote
//! (docs/recipes/pool-a-language-server.md): pyright from npm, one worker
//! on a workspace, warmed by LSP's `initialize` handshake. A notification
//! job opens an unsaved buffer, a hover on it names the buffer's symbol,
//! the server's `workspace/configuration` requests are answered from the
//! pool's settings, and at close pyright gets `shutdown` then `exit`.
//!
//! pyright comes from the folder `.ci/run` installs it into
//! (`target/lsp-node`); without it this says how to install it and stops.

use std::path::PathBuf;

use kennel::Fixed;
use kennel_process::{Coprocess, CoprocessSpec, Framing, Handshake};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let pyright = root.join("target/lsp-node/node_modules/.bin/pyright-langserver");
    if !pyright.exists() {
        println!("install pyright first (as .ci/run does):");
        println!("  npm install --prefix target/lsp-node pyright@1.1.414");
        return Ok(());
    }
    let workspace = std::env::temp_dir().join(format!("kennel-lsp-{}", std::process::id()));
    std::fs::create_dir_all(&workspace)?;
    let folder = format!("file://{}", workspace.display());

    // The handshake names the workspace and says kennel answers settings.
    let handshake = Handshake::lsp()
        .param("rootUri", json!(folder))
        .param("workspaceFolders", json!([{"uri": folder, "name": "demo"}]))
        .capabilities(json!({"workspace": {"configuration": true}}));
    let pool = CoprocessSpec::new([pyright.as_os_str(), "--stdio".as_ref()])
        .framing(Framing::ContentLength)
        .handshake(handshake)
        .settings(json!({"python": {"analysis": {"typeCheckingMode": "basic"}}}))
        .pool()
        .name("pyright")
        .sizing(Fixed(1))
        .build()?;

    // An unsaved buffer: pyright knows it only from the notification.
    let file = format!("{folder}/unsaved.py");
    let text = "def greet(name: str) -> str: ...\n\ngreet('kennel')\n";
    let open =
        json!({"textDocument": {"uri": file, "languageId": "python", "version": 1, "text": text}});
    let hover = json!({"textDocument": {"uri": file}, "position": {"line": 2, "character": 1}});
    let reply: Value = pool
        .run(async |w: &mut Coprocess| {
            w.notify("textDocument/didOpen", Some(&open)).await?;
            w.call(&json!({"method": "textDocument/hover", "params": hover}))
                .await
        })
        .await??;
    println!(
        "hover: {}",
        reply["contents"]["value"].as_str().unwrap_or_default()
    );
    pool.close().await;
    println!("closed: pyright got shutdown, then exit");
    std::fs::remove_dir_all(&workspace)?;
    Ok(())
}
