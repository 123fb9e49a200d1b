//! The measuring windows: when one counts (jobs waiting, every running
//! worker ready), and the pause between steps, counted in windows.

use std::time::Duration;

use kennel::{Parallel, Pool};

use crate::support::{Farm, secs};
use crate::support_sim::{Curve, Load, Machine, Record, mins, run_for};
use crate::{build, hill, show};

/// The gap after the `k`-th step in a row that changes nothing holds a pause
/// of `min(16, 2^(k-1))` windows × 0.5..1.5, plus the next step's three
/// windows (2 s each here: at every size tried, 20 jobs take under 2 s; plus
/// up to a job's time to settle after each change of size).
fn pause_band(k: u32) -> std::ops::Range<f64> {
    let windows = f64::from((1u32 << (k - 1).min(4)).min(16));
    let window = 2.0;
    (window * 0.5 * windows + 3.0 * window)..(window * 1.5 * windows + 3.0 * window + 3.0)
}

#[tokio::test(start_paused = true)]
async fn the_pause_doubles_up_to_sixteen_windows_and_resets_on_a_change() {
    let quick = |cores| Curve {
        work: Duration::from_millis(250),
        ..Curve::cores(cores)
    };
    let machine = Machine::new(quick(6.0), 8);
    let farm = Farm::new();
    let pool = build(&farm, hill(8));
    let (record, _e, _s) = Record::start(&pool);
    let _load = Load::start(&pool, &machine, 40, 40);
    run_for(mins(15)).await;

    let steps = record.steps();
    let last_change = steps.iter().rposition(|(_, s)| s.to != s.from).unwrap();
    let quiet = &steps[last_change + 1..];
    assert!(quiet.len() >= 9, "{}", show(&steps));
    for k in 1..quiet.len() {
        let gap = (quiet[k].0 - quiet[k - 1].0).as_secs_f64();
        let band = pause_band(k as u32);
        assert!(
            band.contains(&gap),
            "gap {gap:.1}s after quiet step {k} outside {band:?}:\n{}",
            show(&steps)
        );
    }
    let longest = quiet
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).as_secs_f64())
        .fold(0.0, f64::max);
    assert!(longest > 22.0, "it reached 16 windows: {longest:.1}s");

    // Two cores go: steps change the size again, and the pause starts over.
    machine.set_curve(quick(4.0));
    run_for(mins(10)).await;
    let steps = record.steps();
    let last_change = steps.iter().rposition(|(_, s)| s.to != s.from).unwrap();
    assert!(steps[last_change].0 > mins(15), "{}", show(&steps));
    let after = &steps[last_change..];
    assert!(after.len() >= 4, "{}", show(&steps));
    for k in 1..after.len().min(5) {
        let gap = (after[k].0 - after[k - 1].0).as_secs_f64();
        let band = if k == 1 {
            // Right after a change: no pause.
            6.0..9.0
        } else {
            pause_band(k as u32 - 1)
        };
        assert!(
            band.contains(&gap),
            "gap {gap:.1}s after step {k} since the change outside {band:?}:\n{}",
            show(&steps)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn no_window_counts_while_the_queue_is_empty() {
    let machine = Machine::new(Curve::cores(6.0), 9);
    let farm = Farm::new();
    let pool = build(&farm, hill(9));
    let (record, _e, _s) = Record::start(&pool);
    // Two clients keep both workers busy, but no job ever waits.
    let load = Load::start(&pool, &machine, 40, 2);
    run_for(mins(60)).await;
    assert!(machine.done() > 10_000, "the workers were busy");
    assert!(record.steps().is_empty(), "{}", show(&record.steps()));
    assert_eq!(pool.stats().size, 2);

    load.set_active(40);
    run_for(mins(1)).await;
    assert!(!record.steps().is_empty(), "with jobs waiting it steps");
}

#[tokio::test(start_paused = true)]
async fn a_window_cut_short_by_an_empty_queue_starts_again() {
    let machine = Machine::new(Curve::cores(6.0), 10);
    let farm = Farm::new();
    let pool = build(&farm, hill(10));
    let (record, _e, _s) = Record::start(&pool);
    let load = Load::start(&pool, &machine, 10, 2);
    // A job waits for 1.2 s in every 5 s (a little more while the third
    // client's last job runs): never for a whole window of 2 s, though the
    // time with jobs waiting adds up to many windows.
    for _ in 0..360 {
        load.set_active(3);
        run_for(Duration::from_millis(1200)).await;
        load.set_active(2);
        run_for(Duration::from_millis(3800)).await;
    }
    assert!(record.steps().is_empty(), "{}", show(&record.steps()));

    // Jobs that wait for longer make windows.
    load.set_active(10);
    run_for(mins(2)).await;
    assert!(!record.steps().is_empty());
}

#[tokio::test(start_paused = true)]
async fn windows_count_only_while_every_running_worker_is_ready() {
    let machine = Machine::new(Curve::cores(6.0), 11);
    let farm = Farm::with_warmup(secs(60));
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(hill(11))
        .with_options(|o| o.max_waiting = Some(1000))
        .build()
        .unwrap();
    let (record, _e, _s) = Record::start(&pool);
    let _load = Load::start(&pool, &machine, 40, 40);
    run_for(mins(5)).await;
    let steps = record.steps();
    let (at, first) = &steps[0];
    assert_eq!((first.from, first.tried, first.to), (2, 3, 3));
    // 60 s until the first two are ready, a window, 60 s more for the third,
    // then its window and one more.
    assert!(*at >= secs(126), "first step at {at:?}:\n{}", show(&steps));
}
