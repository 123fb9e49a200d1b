//! Where each learning sizing settles: HillClimbing within one of the
//! best size, Gradient at its limit, and both again when the curve moves.

use crate::support::Farm;
use crate::support_sim::{Curve, Load, Machine, Record, mins, run_for};
use crate::{assert_settled, build, gradient, hill, show};

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
