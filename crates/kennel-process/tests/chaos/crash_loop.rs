//! A crash loop: a pool whose every worker fails, with no job to ask for
//! one, where each slot's restarts must be spaced by the back-off.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kennel::Fixed;

use crate::common::eventually;
use crate::processes::{Spawned, leftovers, pool_of};
use crate::{CLOSE_DEADLINE, Startup, backoff};

/// A pool whose every worker fails (its warm-up, or right after it) with no
/// job to ask for one: each slot's starts must be spaced by the back-off.
pub(crate) async fn crash_loop(
    startup: Startup,
    flags: &[&str],
    run_for: Duration,
) -> (Vec<String>, usize) {
    let spawned = Spawned::default();
    let flags: Vec<String> = flags.iter().map(|s| (*s).to_owned()).collect();
    let pool = startup
        .apply(pool_of("crash-loop", &flags, 1, &spawned))
        .sizing(Fixed(2))
        .build()
        .expect("pool");
    tokio::time::sleep(run_for).await;
    tokio::time::timeout(CLOSE_DEADLINE, pool.close())
        .await
        .expect("close");
    let mut wrong = Vec::new();
    let procs = spawned.all();
    let mut by_slot: BTreeMap<usize, Vec<Instant>> = BTreeMap::new();
    for p in &procs {
        by_slot.entry(p.slot).or_default().push(p.at);
    }
    for (slot, starts) in &by_slot {
        for (k, pair) in starts.windows(2).enumerate() {
            let gap = pair[1] - pair[0];
            let rule = backoff(k as u32 + 1);
            if gap < rule {
                wrong.push(format!(
                    "{startup:?} {flags:?}: slot {slot} restarted after {gap:?}, under the {rule:?} back-off"
                ));
            }
        }
        // 1 + 2 + 4 s fit in 7.5 s, 8 more do not: at most four starts.
        if starts.len() > 4 {
            wrong.push(format!(
                "{startup:?}: slot {slot} started {} times",
                starts.len()
            ));
        }
    }
    if by_slot.get(&0).is_none_or(|s| s.len() < 3) {
        wrong.push(format!(
            "{startup:?} {flags:?}: slot 0 was not restarted: {by_slot:?}"
        ));
    }
    eventually("the crash-loop workers and their groups end", || {
        leftovers(&procs).is_empty()
    })
    .await;
    (wrong, procs.len())
}
