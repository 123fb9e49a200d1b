//! `max_memory` with real processes: kennel measures the resident memory of
//! a worker's whole process group from `/proc`, a child it forks included,
//! and retires the worker once it is over the limit.
//!
//! Real processes need real time, so this runs on the real clock with short,
//! bounded waits.

#![cfg(target_os = "linux")]

mod common;

use common::{eventually, group_members, within};
use kennel::{Fixed, Parallel, WorkerRow};
use kennel_process::CoprocessSpec;
use serde_json::json;

/// A worker that allocates (and touches) `mb` MiB in itself, or in a child
/// it forks, when asked.
const GROWER: &str = r#"
import json, os, sys, time
held = []
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    mb = req.get("mb", 0)
    if req.get("child"):
        if os.fork() == 0:
            block = bytearray(mb << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(1000)
            os._exit(0)
    else:
        block = bytearray(mb << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        held.append(block)
    print(json.dumps({"ok": True}), flush=True)
"#;

/// The resident memory of the group `pgid`, from each member's
/// `/proc/<pid>/status` (`VmRSS`), summed: a reading of its own, to check
/// kennel's against.
fn vm_rss_of_group(pgid: u32) -> u64 {
    group_members(pgid)
        .into_iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?.to_owned();
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .sum()
}

fn row(rows: &[WorkerRow]) -> &WorkerRow {
    &rows[0]
}

#[tokio::test]
async fn max_memory_retires_a_worker_whose_process_group_grew_past_it() {
    let pool = CoprocessSpec::new(["python3", "-c", GROWER])
        .pool()
        .name("grower")
        .startup(Parallel)
        .sizing(Fixed(1))
        .with_options(|o| o.max_memory = Some(170 << 20))
        .build()
        .expect("a pool");
    let mut lease = within("a worker", pool.lend()).await.expect("a worker");
    let pid = lease.pid();
    // 60 MiB in a child it forks, then 60 MiB in the worker: each under the
    // limit, together under it too. The child comes first, so that it does
    // not share (and count again) the worker's 60 MiB.
    for req in [json!({"mb": 60, "child": true}), json!({"mb": 60})] {
        lease.request(&req).await.expect("a reply");
    }
    eventually("the child holds its memory", || {
        group_members(pid).len() == 2
    })
    .await;
    eventually("the child has touched its memory", || {
        vm_rss_of_group(pid) > 120 << 20
    })
    .await;
    drop(lease);
    // The return's sample is under the limit: the worker stays.
    let measured = row(&pool.workers()).memory.expect("sampled at return");
    let theirs = vm_rss_of_group(pid);
    let diff = measured.abs_diff(theirs) as f64 / theirs as f64;
    assert!(
        diff < 0.10,
        "kennel {measured} bytes, /proc VmRSS {theirs} bytes: {diff:.3} apart"
    );
    assert!(measured > 120 << 20, "the child counts: {measured}");
    assert_eq!(row(&pool.workers()).pid, Some(pid));
    // 60 MiB more: over 170 MiB, retired when this job returns.
    let mut lease = within("the same worker", pool.lend())
        .await
        .expect("a worker");
    assert_eq!(lease.pid(), pid);
    lease.request(&json!({"mb": 60})).await.expect("a reply");
    drop(lease);
    eventually("the worker and its child are gone", || {
        group_members(pid).is_empty()
    })
    .await;
    eventually("a replacement is up", || {
        row(&pool.workers()).pid.is_some_and(|p| p != pid)
    })
    .await;
    within("close", pool.close()).await;
}
