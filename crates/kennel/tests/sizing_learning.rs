//! The learning sizings, HillClimbing and Gradient, on a simulated workload
//! whose best size is known (see `support_sim`), under paused time and seeded
//! randomness.
mod support;
mod support_sim;

use std::time::Duration;

use kennel::{Gradient, HillClimbing, Parallel, Pool, Sizing, SizingStep, TestComputer, Verdict};
use support::{Fake, Farm, secs};
use support_sim::{Curve, Load, Machine, Record, mins, run_for};

const GIB: u64 = 1 << 30;

/// 16 CPUs and 64 GiB: with 2 GiB per worker, a capacity of 16.
fn roomy() -> TestComputer {
    TestComputer::new(16, 64 * GIB)
}

fn build(farm: &Farm, sizing: impl Sizing) -> Pool<Fake> {
    Pool::builder(farm.factory())
        .sizing(sizing)
        .max_waiting(1000)
        .build()
        .unwrap()
}

fn hill(seed: u64) -> HillClimbing {
    HillClimbing::new(2 * GIB, roomy()).seed(seed)
}

fn gradient(seed: u64) -> Gradient {
    Gradient::new(2 * GIB, roomy()).seed(seed)
}

fn show(steps: &[(Duration, SizingStep)]) -> String {
    steps
        .iter()
        .map(|(at, s)| {
            format!(
                "{:>7.1}s {}->{} tried {} {:?}: {}\n",
                at.as_secs_f64(),
                s.from,
                s.to,
                s.tried,
                s.verdict,
                s.figures
            )
        })
        .collect()
}

/// The step `to` sizes from `from` on all lie in `range`.
fn assert_settled(record: &Record, from: Duration, range: std::ops::RangeInclusive<usize>) {
    let steps = record.steps_since(from);
    assert!(
        !steps.is_empty(),
        "no step after {from:?}:\n{}",
        show(&record.steps())
    );
    for s in &steps {
        assert!(
            range.contains(&s.to),
            "settled outside {range:?} after {from:?}:\n{}",
            show(&record.steps())
        );
    }
}

#[tokio::test(start_paused = true)]
async fn hill_climbing_starts_at_two_and_settles_within_one_of_the_best_size_and_stays() {
    let curve = Curve::cores(6.0);
    assert_eq!(curve.best(16), 6);
    let machine = Machine::new(curve, 1);
    let farm = Farm::new();
    let pool = build(&farm, hill(1));
    let s = pool.stats();
    assert_eq!((s.capacity, s.size), (16, 2));
    let (record, _e, _s) = Record::start(&pool);
    let _load = Load::start(&pool, &machine, 40, 40);

    run_for(mins(5)).await;
    let steps = record.steps();
    let climb: Vec<_> = steps.iter().take(4).map(|(_, s)| (s.from, s.to)).collect();
    assert_eq!(climb, [(2, 3), (3, 4), (4, 5), (5, 6)], "{}", show(&steps));

    let done = machine.done();
    run_for(mins(25)).await;
    assert_settled(&record, mins(5), 5..=7);
    assert!(
        record
            .sizes_since(mins(5))
            .iter()
            .all(|s| (5..=7).contains(s)),
        "trials go one away at most"
    );
    assert!(
        !record.steps_since(mins(25)).is_empty(),
        "it keeps stepping:\n{}",
        show(&record.steps())
    );
    // Settled, it runs at least 90% of the best fixed size's jobs per second.
    let rate = (machine.done() - done) as f64 / mins(25).as_secs_f64();
    let best = curve.jobs_per_sec(6);
    assert!(rate >= 0.9 * best, "{rate:.2} jobs/s, best {best:.2}");
}

#[tokio::test(start_paused = true)]
async fn gradient_settles_at_the_largest_size_within_one_and_a_half_times_the_two_worker_time() {
    let curve = Curve::cores(6.0);
    assert_eq!(curve.gradient_limit(16), 7);
    let machine = Machine::new(curve, 2);
    let farm = Farm::new();
    let pool = build(&farm, gradient(2));
    assert_eq!(pool.stats().size, 2);
    let (record, _e, _s) = Record::start(&pool);
    let _load = Load::start(&pool, &machine, 40, 40);

    run_for(mins(5)).await;
    let steps = record.steps();
    let climb: Vec<_> = steps.iter().take(5).map(|(_, s)| (s.from, s.to)).collect();
    assert_eq!(
        climb,
        [(2, 3), (3, 4), (4, 5), (5, 6), (6, 7)],
        "{}",
        show(&steps)
    );
    run_for(mins(25)).await;
    assert_settled(&record, mins(5), 7..=7);
    let figures = record.steps_since(mins(5));
    assert!(
        figures.iter().any(|s| s.tried == 2),
        "it measures the 2-worker time again now and then:\n{}",
        show(&record.steps())
    );
}

#[tokio::test(start_paused = true)]
async fn hill_climbing_follows_the_best_size_when_the_curve_moves() {
    let machine = Machine::new(Curve::cores(6.0), 3);
    let farm = Farm::new();
    let pool = build(&farm, hill(3));
    let (record, _e, _s) = Record::start(&pool);
    let _load = Load::start(&pool, &machine, 40, 40);
    run_for(mins(5)).await;
    assert_settled(&record, mins(3), 5..=7);

    // Other work takes two cores: the best size is 4 now.
    let fewer = Curve::cores(4.0);
    assert_eq!(fewer.best(16), 4);
    machine.set_curve(fewer);
    run_for(mins(15)).await;
    assert_settled(&record, mins(12), 3..=5);
    assert_eq!(record.settled(), Some(4), "{}", show(&record.steps()));

    // And then it has 8.
    let more = Curve::cores(8.0);
    assert_eq!(more.best(16), 8);
    machine.set_curve(more);
    run_for(mins(15)).await;
    assert_settled(&record, mins(27), 7..=9);
}

#[tokio::test(start_paused = true)]
async fn gradient_follows_its_limit_when_the_curve_moves() {
    let machine = Machine::new(Curve::cores(6.0), 4);
    let farm = Farm::new();
    let pool = build(&farm, gradient(4));
    let (record, _e, _s) = Record::start(&pool);
    let _load = Load::start(&pool, &machine, 40, 40);
    run_for(mins(5)).await;
    assert_settled(&record, mins(3), 7..=7);

    let more = Curve {
        cores: 10.0,
        contention: 0.2,
        ..Curve::cores(10.0)
    };
    assert_eq!(more.gradient_limit(16), 11);
    machine.set_curve(more);
    run_for(mins(15)).await;
    assert_settled(&record, mins(12), 11..=11);

    let fewer = Curve::cores(4.0);
    assert_eq!(fewer.gradient_limit(16), 5);
    machine.set_curve(fewer);
    run_for(mins(15)).await;
    assert_settled(&record, mins(27), 5..=5);
}

/// `@zukhruf/pool`'s plain test computer: 4 CPUs and 8 GiB free, 2 GiB per
/// worker (capacity 4); free memory drops to 2.5 GiB: 1 worker runs, within one
/// window, and the workers that no longer fit are closed to free their memory.
/// The pool's own workers hold memory of the 8 GiB, so a new worker never
/// starts while they would not fit.
async fn a_memory_drop_cuts_the_running_size(sizing: impl Sizing, computer: &TestComputer) {
    let machine = Machine::new(Curve::cores(6.0), 5);
    let farm = Farm::new();
    let pool = build(&farm, sizing);
    assert_eq!(pool.stats().capacity, 4);
    let (record, _e, _s) = Record::start(&pool);
    let _load = Load::start(&pool, &machine, 40, 40);
    run_for(mins(3)).await;
    assert_eq!(record.settled(), Some(4), "{}", show(&record.steps()));
    assert!(
        record.steps().iter().all(|(_, s)| s.tried <= 4),
        "never more than the capacity"
    );
    assert_eq!(farm.made(), 4);

    computer.set_memory(5 * GIB / 2);
    let dropped = record.steps().len();
    run_for(secs(2)).await;
    assert_eq!(pool.stats().size, 1, "{}", show(&record.steps()));
    let steps = record.steps();
    let (_, cut) = &steps[dropped];
    assert_eq!((cut.to, cut.verdict), (1, Verdict::MemoryShort), "{cut:?}");
    assert!(cut.from >= 3, "{cut:?}");
    assert!(cut.figures.contains("1 fit"), "{}", cut.figures);

    run_for(mins(5)).await;
    assert!(
        record
            .sizes_since(mins(3) + secs(3))
            .iter()
            .all(|&s| s == 1)
    );
    assert_eq!(farm.made(), 4, "no worker started without its memory");
    assert_eq!(
        farm.alive(),
        1,
        "the workers that did not fit were closed to free their memory"
    );

    // Memory is back: new workers start again, up to the capacity.
    computer.set_memory(8 * GIB);
    run_for(mins(3)).await;
    assert_eq!(record.settled(), Some(4), "{}", show(&record.steps()));
    assert_eq!(farm.made(), 7);
}

#[tokio::test(start_paused = true)]
async fn a_memory_drop_cuts_hill_climbing_to_what_fits_within_one_window() {
    let computer = TestComputer::new(4, 8 * GIB);
    let sizing = HillClimbing::new(2 * GIB, computer.clone()).seed(6);
    a_memory_drop_cuts_the_running_size(sizing, &computer).await;
}

#[tokio::test(start_paused = true)]
async fn a_memory_drop_cuts_gradient_to_what_fits_within_one_window() {
    let computer = TestComputer::new(4, 8 * GIB);
    let sizing = Gradient::new(2 * GIB, computer.clone()).seed(7);
    a_memory_drop_cuts_the_running_size(sizing, &computer).await;
}

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
        .max_waiting(1000)
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

/// The share of the samples from `from` on at `size`.
fn share_at(record: &Record, from: Duration, size: usize) -> f64 {
    let sizes = record.sizes_since(from);
    sizes.iter().filter(|&&s| s == size).count() as f64 / sizes.len().max(1) as f64
}

#[tokio::test(start_paused = true)]
async fn a_trial_ends_as_soon_as_its_jobs_show_that_it_cannot_pay() {
    // Two cores that two workers keep busy, jobs of 1 s ± 30%: one worker
    // serves half as many, and a full window would take 20 of its jobs.
    let curve = Curve {
        work: secs(1),
        jitter: 0.3,
        ..Curve::cores(2.0)
    };
    let machine = Machine::new(curve, 15);
    let farm = Farm::new();
    let two_cores = TestComputer::new(2, 64 * GIB);
    let pool = build(&farm, HillClimbing::new(2 * GIB, two_cores).seed(15));
    let (record, _e, _s) = Record::start(&pool);
    let _load = Load::start(&pool, &machine, 4, 4);
    run_for(mins(10)).await;
    let steps = record.steps();
    assert!(steps.len() >= 3, "{}", show(&steps));
    for (_, s) in &steps {
        assert_eq!((s.from, s.tried, s.to), (2, 1, 2), "{}", show(&steps));
        let jobs: u32 = s
            .figures
            .split("the trial showed it after ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not ended early: {}", s.figures));
        assert!(jobs < 10, "{}", s.figures);
    }
    let at_one = share_at(&record, mins(1), 1);
    assert!(
        at_one <= 0.1,
        "{:.0}% of the time at 1:\n{}",
        at_one * 100.0,
        show(&steps)
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_down_keeps_workers_alive_and_a_step_up_uses_them_first() {
    let machine = Machine::new(Curve::cores(6.0), 12);
    let farm = Farm::with_warmup(secs(30));
    let pool = build(&farm, hill(12));
    let (record, _e, _s) = Record::start(&pool);
    let _load = Load::start(&pool, &machine, 40, 40);
    run_for(mins(20)).await;
    let steps = record.steps();
    let highest = steps.iter().map(|(_, s)| s.tried.max(s.to)).max().unwrap();
    assert!(
        steps.iter().any(|(_, s)| s.tried < s.from),
        "{}",
        show(&steps)
    );
    assert!(record.most_kept() >= 1, "a step down keeps workers");
    assert_eq!(
        farm.made(),
        highest,
        "each size was reached once with a new worker, later with kept ones"
    );
}

#[tokio::test(start_paused = true)]
async fn every_step_is_an_event_with_its_figures_and_verdict() {
    for learning in ["hill", "gradient"] {
        let machine = Machine::new(Curve::cores(6.0), 13);
        let farm = Farm::new();
        let pool = if learning == "hill" {
            build(&farm, hill(13))
        } else {
            build(&farm, gradient(13))
        };
        let (record, _e, _s) = Record::start(&pool);
        let _load = Load::start(&pool, &machine, 40, 40);
        run_for(mins(10)).await;
        let steps = record.steps();
        let (_, first) = &steps[0];
        assert_eq!(
            (first.from, first.tried, first.to, first.verdict),
            (2, 3, 3, Verdict::Pays)
        );
        let unit = if learning == "hill" {
            "jobs/s"
        } else {
            "job time"
        };
        for (_, s) in &steps {
            assert!(s.figures.starts_with(unit), "{learning}: {}", s.figures);
            assert_ne!(s.tried, s.from);
            let up = s.tried > s.from;
            match s.verdict {
                Verdict::Pays if up => assert_eq!(s.to, s.tried),
                Verdict::Pays | Verdict::DoesNotPay if !up => {
                    assert!(s.to == s.from || s.to == s.from - 1, "{s:?}");
                }
                Verdict::DoesNotPay => assert_eq!(s.to, s.from),
                v => panic!("{v:?}"),
            }
        }
        assert!(
            steps.iter().any(|(_, s)| s.verdict == Verdict::DoesNotPay),
            "{}",
            show(&steps)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_same_seed_takes_the_same_steps_at_the_same_times() {
    async fn run(seed: u64) -> Vec<(Duration, usize, usize, usize)> {
        let machine = Machine::new(Curve::cores(6.0), 14);
        let farm = Farm::new();
        let pool = build(&farm, hill(seed));
        let (record, e, s) = Record::start(&pool);
        let load = Load::start(&pool, &machine, 40, 40);
        run_for(mins(10)).await;
        drop(load);
        e.abort();
        s.abort();
        pool.close().await;
        record
            .steps()
            .into_iter()
            .map(|(at, s)| (at, s.from, s.tried, s.to))
            .collect()
    }
    let a = run(21).await;
    assert!(a.len() > 5);
    assert_eq!(a, run(21).await);
    assert_ne!(a, run(22).await, "the pauses differ");
}
