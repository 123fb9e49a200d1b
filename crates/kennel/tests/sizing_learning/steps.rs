//! The steps themselves: a trial ended as soon as it cannot pay, kept
//! workers used first, an event with figures and verdict for each, and
//! the same steps at the same times for the same seed.

use std::time::Duration;

use kennel::{HillClimbing, TestComputer, Verdict};

use crate::support::{Farm, secs};
use crate::support_sim::{Curve, Load, Machine, Record, mins, run_for};
use crate::{GIB, build, gradient, hill, show};

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
