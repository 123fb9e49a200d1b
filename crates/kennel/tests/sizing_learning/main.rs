//! The learning sizings, HillClimbing and Gradient, on a simulated workload
//! whose best size is known (see `support_sim`), under paused time and seeded
//! randomness.
#[path = "../support/mod.rs"]
mod support;
#[path = "../support_sim/mod.rs"]
mod support_sim;

mod memory;
mod settling;
mod steps;
mod windows;

use std::time::Duration;

use kennel::{Gradient, HillClimbing, Pool, Sizing, SizingStep, TestComputer};
use support::{Fake, Farm};
use support_sim::Record;

const GIB: u64 = 1 << 30;

/// 16 CPUs and 64 GiB: with 2 GiB per worker, a capacity of 16.
fn roomy() -> TestComputer {
    TestComputer::new(16, 64 * GIB)
}

fn build(farm: &Farm, sizing: impl Sizing) -> Pool<Fake> {
    Pool::builder(farm.factory())
        .sizing(sizing)
        .with_options(|o| o.max_waiting = Some(1000))
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
