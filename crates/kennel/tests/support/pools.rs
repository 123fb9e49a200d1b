//! Pools of fake workers, built in one call, and a wait until a worker
//! has been made.

use kennel::{Fixed, OnDemand, Parallel, Pool, PoolBuilder, Startup};

use super::clock::{advance, ms};
use super::fake::Fake;
use super::farm::Farm;

/// A builder of a pool of fake workers from `farm`, with `startup` and
/// `Fixed(n)`: add the options a test needs, then build.
pub fn fixed(farm: &Farm, startup: impl Startup, n: usize) -> PoolBuilder<Fake> {
    Pool::builder(farm.factory())
        .startup(startup)
        .sizing(Fixed(n))
}

/// A pool of `n` fake workers from `farm`, with `startup` and `Fixed(n)`.
pub fn pool_of(farm: &Farm, startup: impl Startup, n: usize) -> Pool<Fake> {
    fixed(farm, startup, n).build().unwrap()
}

/// A pool of `n` fake workers that all start when it is built
/// (`Parallel`, `Fixed(n)`).
pub fn parallel(farm: &Farm, n: usize) -> Pool<Fake> {
    pool_of(farm, Parallel, n)
}

/// A pool of up to `n` fake workers, each started when a job needs one
/// (`OnDemand`, `Fixed(n)`).
pub fn on_demand(farm: &Farm, n: usize) -> Pool<Fake> {
    pool_of(farm, OnDemand, n)
}

/// [`parallel`], named `name` (for a registry).
pub fn named_parallel(farm: &Farm, name: &str, n: usize) -> Pool<Fake> {
    fixed(farm, Parallel, n).name(name).build().unwrap()
}

/// [`on_demand`], named `name` (for a registry).
pub fn named_on_demand(farm: &Farm, name: &str, n: usize) -> Pool<Fake> {
    fixed(farm, OnDemand, n).name(name).build().unwrap()
}

/// Ready workers of `pool`: idle or lent.
pub fn ready(pool: &Pool<Fake>) -> usize {
    let s = pool.stats();
    s.idle + s.lent
}

/// Waits (on the paused clock, in steps of 100 ms) until worker `id` has
/// been made, and panics if it never is.
pub async fn until_made(farm: &Farm, id: usize) {
    for _ in 0..10_000 {
        if farm.made() > id {
            return;
        }
        advance(ms(100)).await;
    }
    panic!("worker {id} was never made");
}
