//! A pool of coprocesses from one [`CoprocessSpec`], each worker told its
//! pool and slot.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use kennel::{Key, Pool, PoolBuilder, SlotInfo};

use crate::coprocess::Coprocess;
use crate::spec::CoprocessSpec;

impl CoprocessSpec {
    /// Starts building a pool whose workers are this spec, one per slot:
    /// the factory [`spawn`](Self::spawn)s [`for_slot`](Self::for_slot)'s
    /// spec for each, so a worker finds its pool's name
    /// ([`PoolBuilder::name`]) in `KENNEL_POOL`, its slot (from 0) in
    /// `KENNEL_SLOT`, and in a pool bound by key its key in `KENNEL_KEY`
    /// (see [`for_slot`](Self::for_slot)).
    ///
    /// ```
    /// use kennel::{Fixed, Parallel};
    /// use kennel_process::{Coprocess, CoprocessSpec};
    /// use serde_json::json;
    ///
    /// // An echo worker that adds its pool and slot to each reply.
    /// const WORKER: &str = r#"
    /// import json, os, sys
    /// print(json.dumps({"ready": True}), flush=True)
    /// for line in sys.stdin:
    ///     reply = json.loads(line)
    ///     reply["pool"] = os.environ["KENNEL_POOL"]
    ///     reply["slot"] = os.environ["KENNEL_SLOT"]
    ///     print(json.dumps(reply), flush=True)
    /// "#;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let pool = CoprocessSpec::new(["python3", "-c", WORKER])
    ///     .pool()
    ///     .name("echo")
    ///     .startup(Parallel)
    ///     .sizing(Fixed(1))
    ///     .build()?;
    ///
    /// let reply = pool
    ///     .run(async |w: &mut Coprocess| w.request(&json!({"n": 1})).await)
    ///     .await??;
    /// assert_eq!(reply, json!({"n": 1, "pool": "echo", "slot": "0"}));
    /// pool.close().await;
    /// # Ok(()) }
    /// ```
    pub fn pool(self) -> PoolBuilder<Coprocess> {
        Pool::builder(move |info: SlotInfo| {
            let spec = self.for_slot(&info);
            async move { spec.spawn() }
        })
    }

    /// This spec for the worker of `info`'s slot: [labelled](Self::label),
    /// told its pool and slot in `KENNEL_POOL` and `KENNEL_SLOT` (over the
    /// spec's), with a [`threads`](Self::threads) budget its share for the
    /// pool's size as it starts, and [pinned](Self::pin) to its CPUs.
    /// A worker placed on a GPU ([`SlotInfo::gpu`]) finds the device's
    /// UUID in `CUDA_VISIBLE_DEVICES` (so CUDA shows it that one device,
    /// as device 0) and its id in `KENNEL_GPU`.
    ///
    /// # Keys
    ///
    /// A worker started for one key ([`SlotInfo::key`], in a pool bound
    /// with [`KeyBinding::Spawn`](kennel::KeyBinding::Spawn)) finds it in
    /// `KENNEL_KEY`, and each `{key}` in the argv and in the values of
    /// [`env`](Self::env) becomes the key (`--model {key}`). A worker
    /// started without a key gets the argv and env as written, and no
    /// `KENNEL_KEY` (not even inherited). The key goes to the program as
    /// one argument of its own, never through a shell.
    pub fn for_slot(&self, info: &SlotInfo) -> Self {
        let mut spec = self.with_key(info.key.as_ref());
        if let Some(budget) = self.threads {
            let n = budget.threads(info.size).to_string();
            for var in crate::THREAD_VARIABLES {
                if !self.env.iter().any(|(k, _)| k == var) {
                    spec = spec.env(var, &n);
                }
            }
        }
        spec.cpus = None;
        if self.pin {
            let threads = self
                .threads
                .unwrap_or(crate::ThreadBudget::Share)
                .threads(info.size);
            let allowed = crate::pin::allowed_cpus();
            if let Some(cpus) = crate::pin::share(&allowed, info.slot, threads) {
                spec = spec.env("KENNEL_CPUS", crate::pin::cpu_list(&cpus));
                spec.cpus = Some(cpus.into());
            }
        }
        if let Some(gpu) = &info.gpu {
            // Over the spec's: the pool chose the device.
            spec = spec
                .env("CUDA_VISIBLE_DEVICES", &gpu.uuid)
                .env("KENNEL_GPU", &gpu.id);
        }
        spec.env("KENNEL_POOL", &*info.pool)
            .env("KENNEL_SLOT", info.slot.to_string())
            .label(&*info.pool, info.slot)
    }

    /// This spec with `{key}` in its argv and env values replaced by `key`
    /// and `KENNEL_KEY` set to it; without a key, as it is, less
    /// `KENNEL_KEY`.
    fn with_key(&self, key: Option<&Key>) -> Self {
        let Some(text) = key.map(Key::as_str) else {
            return self.clone().env_remove(KEY_VARIABLE);
        };
        let mut spec = self.clone();
        for arg in &mut spec.argv {
            *arg = put_key(arg, text);
        }
        for (_, value) in &mut spec.env {
            *value = put_key(value, text);
        }
        spec.env(KEY_VARIABLE, text)
    }
}

/// The variable in which a worker started for one key finds it.
const KEY_VARIABLE: &str = "KENNEL_KEY";

/// The text that stands for the key in the argv and env values.
const KEY_PLACEHOLDER: &str = "{key}";

/// `text` with each `{key}` replaced by `key` (byte by byte: the rest of
/// the text need not be Unicode).
fn put_key(text: &OsStr, key: &str) -> OsString {
    let (bytes, placeholder) = (text.as_bytes(), KEY_PLACEHOLDER.as_bytes());
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = rest
        .windows(placeholder.len())
        .position(|w| w == placeholder)
    {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(key.as_bytes());
        rest = &rest[at + placeholder.len()..];
    }
    out.extend_from_slice(rest);
    OsString::from_vec(out)
}
