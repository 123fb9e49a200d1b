//! A pool of coprocesses from one [`CoprocessSpec`], each worker told its
//! pool and slot.

use kennel::{Pool, PoolBuilder, SlotInfo};

use crate::coprocess::Coprocess;
use crate::spec::CoprocessSpec;

impl CoprocessSpec {
    /// Starts building a pool whose workers are this spec, one per slot.
    ///
    /// For each slot the factory clones the spec, labels it with the pool's
    /// name and the slot (as [`label`](Self::label) does, for the `tracing`
    /// fields of the worker's events and stderr lines), sets the environment
    /// variables `KENNEL_POOL` (the pool's name) and `KENNEL_SLOT` (the slot,
    /// from 0) for the worker, over any value the spec gives them, and
    /// [`spawn`](Self::spawn)s it. The pool's name is the one given to
    /// [`PoolBuilder::name`].
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

    /// This spec for the worker of `info`'s slot, as [`pool`](Self::pool)'s
    /// factory makes it: labelled, told its pool and slot in its
    /// environment (`KENNEL_POOL`, `KENNEL_SLOT`), and, with a
    /// [`threads`](Self::threads) budget, its share of threads for the
    /// pool's size as it starts; [pinned](Self::pin), bound to its share of
    /// the CPUs.
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
