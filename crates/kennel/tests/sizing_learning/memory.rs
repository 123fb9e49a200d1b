//! A drop of free memory: the running size is cut to what fits within
//! one window, and grows again when the memory is back.

use kennel::{Gradient, HillClimbing, Sizing, TestComputer, Verdict};

use crate::support::{Farm, secs};
use crate::support_sim::{Curve, Load, Machine, Record, mins, run_for};
use crate::{GIB, build, show};

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
