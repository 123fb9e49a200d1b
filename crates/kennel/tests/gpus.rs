//! `gpus_per_worker`: workers placed on the GPUs of the pool's computer (a
//! `TestComputer` here, whose GPUs and their processes the test sets), one
//! per device or packed by the memory a share reserves, never started
//! where that memory is short, a replacement waiting for the memory of the
//! worker it replaces, and `max_gpu_memory` retiring a worker.
mod support;

use std::sync::{Arc, Mutex};

use kennel::{
    BoxError, ExitSignal, ExitStatus, Exited, Fixed, GpuPlace, GpusPerWorker, Killer, OnDemand,
    Parallel, Pool, PoolBuilder, Reconfig, RetireReason, SlotInfo, TestComputer, Worker,
};
use support::{advance, drain, retired, secs, settle};

const GIB: u64 = 1 << 30;

/// A worker process as the pool sees it: a pid, and the GPU it was told.
#[derive(Debug)]
struct OnGpu {
    pid: u32,
    gpu: Option<GpuPlace>,
    signal: ExitSignal,
    exited: Option<Exited>,
}

impl Worker for OnGpu {
    async fn ready(&mut self) -> Result<(), BoxError> {
        Ok(())
    }
    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }
    fn killer(&self) -> Killer {
        self.signal.killer()
    }
    fn pid(&self) -> Option<u32> {
        Some(self.pid)
    }
    async fn close(self) {
        self.signal.exit(ExitStatus::Closed);
    }
}

/// The workers made: pid and GPU, in order.
type Made = Arc<Mutex<Vec<(u32, Option<String>)>>>;

fn builder(
    computer: &TestComputer,
    n: usize,
    per_worker: GpusPerWorker,
) -> (PoolBuilder<OnGpu>, Made) {
    let made: Made = Arc::default();
    let m = made.clone();
    let b = Pool::builder(move |info: SlotInfo| {
        let mut m = m.lock().unwrap();
        let pid = 5000 + m.len() as u32;
        m.push((pid, info.gpu.as_ref().map(|g| g.id.clone())));
        let (signal, exited) = ExitSignal::new();
        std::future::ready(Ok::<_, BoxError>(OnGpu {
            pid,
            gpu: info.gpu,
            signal,
            exited: Some(exited),
        }))
    })
    .computer(computer.clone())
    .sizing(Fixed(n))
    .startup(Parallel)
    .with_options(|o| o.gpus_per_worker = Some(per_worker));
    (b, made)
}

fn gpus_of(made: &Made) -> Vec<Option<String>> {
    made.lock()
        .unwrap()
        .iter()
        .map(|(_, g)| g.clone())
        .collect()
}

fn share(share: f64, memory: u64) -> GpusPerWorker {
    GpusPerWorker::Share { share, memory }
}

#[tokio::test(start_paused = true)]
async fn each_worker_gets_a_gpu_of_its_own_and_the_gpus_bound_the_pool() {
    let computer = TestComputer::new(8, 64 * GIB);
    computer.add_gpu("0", 80 * GIB).add_gpu("1", 80 * GIB);
    let (b, made) = builder(&computer, 4, GpusPerWorker::Devices(1));
    let pool = b.build().unwrap();
    settle().await;
    // Two devices take two workers, whatever the sizing asks.
    assert_eq!(pool.stats().capacity, 2);
    assert_eq!(gpus_of(&made), [Some("0".into()), Some("1".into())]);
    // The worker sees its device, and so does its row.
    let told = pool
        .run(async |w: &mut OnGpu| w.gpu.clone())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(told.uuid, format!("GPU-test-{}", told.id));
    let rows: Vec<_> = pool.workers().into_iter().filter_map(|r| r.gpu).collect();
    assert_eq!(rows.len(), 2);
    assert_ne!(rows[0].place, rows[1].place);
}

#[tokio::test(start_paused = true)]
async fn a_device_another_process_computes_on_is_not_a_workers_own() {
    let computer = TestComputer::new(8, 64 * GIB);
    computer.add_gpu("0", 80 * GIB).add_gpu("1", 80 * GIB);
    // Another pool's worker, or another user's job, on device 0.
    computer.set_gpu_process("0", 999, 2 * GIB);
    let (b, made) = builder(&computer, 2, GpusPerWorker::Devices(1));
    let pool = b.build().unwrap();
    settle().await;
    assert_eq!(gpus_of(&made), [Some("1".into())]);
    // It goes: the second worker gets device 0.
    computer.set_gpu_process("0", 999, 0);
    advance(secs(2)).await;
    assert_eq!(gpus_of(&made), [Some("1".into()), Some("0".into())]);
    assert_eq!(pool.stats().idle, 2);
}

#[tokio::test(start_paused = true)]
async fn shares_spread_over_the_devices_then_pack_by_the_memory_they_reserve() {
    let computer = TestComputer::new(8, 64 * GIB);
    computer.add_gpu("0", 40 * GIB).add_gpu("1", 40 * GIB);
    // Half a device and 15 GiB each: two a device, spread first.
    let (b, made) = builder(&computer, 4, share(0.5, 15 * GIB));
    let pool = b.build().unwrap();
    settle().await;
    assert_eq!(pool.stats().capacity, 4);
    let mut on = gpus_of(&made);
    assert_eq!(
        on[..2],
        [Some("0".into()), Some("1".into())],
        "spread first"
    );
    on.sort();
    assert_eq!(
        on,
        [
            Some("0".into()),
            Some("0".into()),
            Some("1".into()),
            Some("1".into())
        ]
    );

    // A quarter each but 10 GiB: a device of 24 GiB takes 2 by its memory.
    let computer = TestComputer::new(8, 64 * GIB);
    computer.add_gpu("0", 24 * GIB);
    let (b, made) = builder(&computer, 4, share(0.25, 10 * GIB));
    let pool = b.build().unwrap();
    settle().await;
    assert_eq!(gpus_of(&made), [Some("0".into()), Some("0".into())]);
    assert_eq!(pool.stats().idle, 2);
}

#[tokio::test(start_paused = true)]
async fn no_worker_starts_where_the_memory_it_reserves_is_not_free() {
    let computer = TestComputer::new(8, 64 * GIB);
    computer.add_gpu("0", 40 * GIB);
    // Another user holds all but 5 GiB.
    computer.set_gpu_free("0", 5 * GIB);
    let (b, made) = builder(&computer, 1, share(1.0, 10 * GIB));
    let pool = b.startup(OnDemand).build().unwrap();
    let p = pool.clone();
    let job = tokio::spawn(async move { p.run(async |w: &mut OnGpu| w.pid).await });
    advance(secs(10)).await;
    assert_eq!(
        made.lock().unwrap().len(),
        0,
        "nothing started on 5 GiB free"
    );
    assert!(!job.is_finished(), "the job waits");
    // The other user lets go: the worker starts, and the job runs.
    computer.set_gpu_free("0", 40 * GIB);
    advance(secs(2)).await;
    assert_eq!(job.await.unwrap().unwrap(), 5000);
    assert_eq!(gpus_of(&made), [Some("0".into())]);
}

#[tokio::test(start_paused = true)]
async fn a_replacement_waits_until_the_worker_it_replaces_let_go_of_its_memory() {
    let computer = TestComputer::new(8, 64 * GIB);
    computer.add_gpu("0", 80 * GIB);
    let (b, made) = builder(&computer, 1, GpusPerWorker::Devices(1));
    let pool = b.with_options(|o| o.max_jobs = Some(1)).build().unwrap();
    let mut events = pool.events();
    settle().await;
    // The worker holds 30 GiB; its one job retires it.
    computer.set_gpu_process("0", 5000, 30 * GIB);
    pool.run(async |_: &mut OnGpu| ()).await.unwrap();
    advance(secs(5)).await;
    assert_eq!(retired(&drain(&mut events)), [(0, RetireReason::MaxJobs)]);
    // It has exited, but the driver still lists its memory: no new worker.
    assert_eq!(made.lock().unwrap().len(), 1);
    // The memory is released: the replacement starts on the device.
    computer.set_gpu_process("0", 5000, 0);
    advance(secs(2)).await;
    assert_eq!(gpus_of(&made), [Some("0".into()), Some("0".into())]);
    assert_eq!(pool.run(async |w: &mut OnGpu| w.pid).await.unwrap(), 5001);
}

#[tokio::test(start_paused = true)]
async fn a_warm_replacement_goes_to_another_device_while_the_old_worker_holds_its_own() {
    let computer = TestComputer::new(8, 64 * GIB);
    computer.add_gpu("0", 80 * GIB).add_gpu("1", 80 * GIB);
    let (b, made) = builder(&computer, 1, GpusPerWorker::Devices(1));
    let pool = b
        .with_options(|o| {
            o.max_jobs = Some(1);
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    settle().await;
    computer.set_gpu_process("0", 5000, 30 * GIB);
    pool.run(async |_: &mut OnGpu| ()).await.unwrap();
    advance(secs(5)).await;
    assert_eq!(gpus_of(&made), [Some("0".into()), Some("1".into())]);
}

#[tokio::test(start_paused = true)]
async fn a_worker_over_max_gpu_memory_is_retired() {
    let computer = TestComputer::new(8, 64 * GIB);
    computer.add_gpu("0", 80 * GIB);
    let (b, made) = builder(&computer, 1, GpusPerWorker::Devices(1));
    let pool = b
        .with_options(|o| {
            o.max_gpu_memory = Some(8 * GIB);
            o.memory_check_every = secs(1);
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    computer.set_gpu_process("0", 5000, 6 * GIB);
    advance(secs(2)).await;
    let row = pool.workers().into_iter().find_map(|r| r.gpu).unwrap();
    assert_eq!(row.memory, Some(6 * GIB), "its row shows what it holds");
    assert!(retired(&drain(&mut events)).is_empty());
    computer.set_gpu_process("0", 5000, 9 * GIB);
    advance(secs(2)).await;
    assert_eq!(
        retired(&drain(&mut events)),
        [(0, RetireReason::MaxGpuMemory)]
    );
    computer.set_gpu_process("0", 5000, 0);
    advance(secs(2)).await;
    assert_eq!(
        made.lock().unwrap().len(),
        2,
        "replaced once its memory went"
    );
}

#[tokio::test(start_paused = true)]
async fn without_gpus_gpus_per_worker_is_refused_with_the_reason() {
    let computer = TestComputer::new(8, 64 * GIB);
    let (b, _) = builder(&computer, 1, GpusPerWorker::Devices(1));
    let e = b.build().unwrap_err();
    assert_eq!(e.option, "gpus_per_worker");
    assert!(
        e.message.contains("no GPU") && e.message.contains("test computer has no GPUs"),
        "{e}"
    );

    computer.add_gpu("0", 80 * GIB);
    let (b, _) = builder(&computer, 1, GpusPerWorker::Devices(1));
    let e = b
        .with_options(|o| o.gpus = vec!["7".into()])
        .build()
        .unwrap_err();
    assert_eq!(e.option, "gpus");
    assert!(
        e.message.contains("\"7\"") && e.message.contains("ids 0"),
        "{e}"
    );

    // Without gpus_per_worker the pool builds as ever, GPUs or none.
    let (b, _) = builder(&TestComputer::new(1, GIB), 1, GpusPerWorker::Devices(1));
    let plain = b
        .with_options(|o| o.gpus_per_worker = None)
        .build()
        .unwrap();
    assert_eq!(
        plain
            .run(async |w: &mut OnGpu| w.gpu.clone())
            .await
            .unwrap(),
        None
    );
}

#[tokio::test(start_paused = true)]
async fn the_gpus_may_change_on_a_live_pool_but_placement_is_not_switched_on_or_off() {
    let computer = TestComputer::new(8, 64 * GIB);
    computer.add_gpu("0", 80 * GIB).add_gpu("1", 80 * GIB);
    let (b, made) = builder(&computer, 1, GpusPerWorker::Devices(1));
    let pool = b
        .with_options(|o| {
            o.gpus = vec!["1".into()];
            o.max_jobs = Some(1);
        })
        .build()
        .unwrap();
    settle().await;
    assert_eq!(gpus_of(&made), [Some("1".into())]);
    // Later workers go where the new list says; the running one stays.
    pool.reconfigure(Reconfig::new().with_options(|o| o.gpus = vec!["GPU-test-0".into()]))
        .unwrap();
    assert_eq!(gpus_of(&made), [Some("1".into())]);
    pool.run(async |_: &mut OnGpu| ()).await.unwrap();
    advance(secs(2)).await;
    assert_eq!(gpus_of(&made), [Some("1".into()), Some("0".into())]);
    // A device that is not there, and switching placement off: refused,
    // nothing changed.
    let e = pool
        .reconfigure(Reconfig::new().with_options(|o| o.gpus = vec!["9".into()]))
        .unwrap_err();
    assert!(e.to_string().contains("no GPU \"9\""), "{e}");
    let e = pool
        .reconfigure(Reconfig::new().with_options(|o| {
            o.gpus_per_worker = None;
            o.gpus.clear();
        }))
        .unwrap_err();
    assert!(
        e.to_string().contains("chosen when the pool is built"),
        "{e}"
    );
    assert_eq!(pool.options().gpus, ["GPU-test-0"]);
}
