//! Lend + return cycles of a default kennel pool on one task, for
//! instruction counts under `valgrind --tool=callgrind` (repeatable whatever
//! else the machine does).
use kennel::{Fixed, Parallel, Pool};
use kennel_bench::Noop;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let pool = Pool::builder(|_| async { Noop::make() })
            .startup(Parallel)
            .sizing(Fixed(1))
            .build()
            .unwrap();
        drop(pool.lend().await.unwrap());
        for _ in 0..n {
            let lease = pool.lend().await.unwrap();
            std::hint::black_box(&lease);
            drop(lease);
        }
    });
}
