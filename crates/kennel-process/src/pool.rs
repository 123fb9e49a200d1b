//! A pool of coprocesses from one [`CoprocessSpec`], each worker told its
//! pool and slot.

use kennel::{Pool, PoolBuilder, SlotInfo};

use crate::coprocess::Coprocess;
use crate::spec::CoprocessSpec;

impl CoprocessSpec {
    /// Starts building a pool whose workers are this spec, one per slot:
    /// the factory [`spawn`](Self::spawn)s [`for_slot`](Self::for_slot)'s
    /// spec for each, so a worker finds its pool's name
    /// ([`PoolBuilder::name`]) in `KENNEL_POOL` and its slot (from 0) in
    /// `KENNEL_SLOT`.
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
    pub fn for_slot(&self, info: &SlotInfo) -> Self {
        let mut spec = self.clone();
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
        spec.env("KENNEL_POOL", &*info.pool)
            .env("KENNEL_SLOT", info.slot.to_string())
            .label(&*info.pool, info.slot)
    }
}
