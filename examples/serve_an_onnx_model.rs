//! Serve an ONNX model (docs/recipes/serve-an-onnx-model.md): two Python
//! workers written with the SDK (`examples/workers/onnx_sdk.py`), each
//! loading the model once, with no thread code of their own. The pool gives
//! each worker its share of the cores (`KENNEL_THREADS`), and the SDK
//! applies it to onnxruntime: each worker reports the intra-op threads its
//! session runs.
//!
//! onnxruntime comes from the venv `.ci/run` makes (`target/threads-venv`);
//! without it this says how to make it and stops.

use std::path::PathBuf;

use kennel::Fixed;
use kennel_process::{Coprocess, CoprocessSpec, ThreadBudget};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join("target/threads-venv/bin/python");
    if !python.exists() {
        println!("make the venv first (as .ci/run does):");
        println!("  python3 -m venv target/threads-venv");
        println!("  target/threads-venv/bin/pip install onnxruntime onnx numpy threadpoolctl");
        return Ok(());
    }
    let worker = root.join("examples/workers/onnx_sdk.py");
    let pool = CoprocessSpec::new([python.as_os_str(), worker.as_os_str()])
        .env("PYTHONPATH", root.join("sdk/python"))
        .threads(ThreadBudget::Share) // the service's default, `threads = "auto"`
        .pool()
        .name("onnx")
        .sizing(Fixed(2))
        .build()?;
    for row in [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, -1.0, 2.0]] {
        let request = json!({ "x": [row] });
        let reply = pool
            .run(async |w: &mut Coprocess| w.request(&request).await)
            .await??;
        println!("x = {row:?}: {reply}");
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!("{cores} cores, 2 workers: each session runs its share, not one thread per core");
    pool.close().await;
    Ok(())
}
