//! Lend + return cycles of a default kennel pool on one task, for
//! instruction counts under `valgrind --tool=callgrind` (repeatable whatever
//! else the machine does).
use kennel::{ExitSignal, Exited, Fixed, Killer, Parallel, Pool, Worker};

struct Noop {
    signal: ExitSignal,
    exited: Option<Exited>,
}

impl Worker for Noop {
    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }
    fn killer(&self) -> Killer {
        self.signal.killer()
    }
}

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
        let pool = Pool::builder(|_| async {
            let (signal, exited) = ExitSignal::new();
            Ok::<_, kennel::BoxError>(Noop {
                signal,
                exited: Some(exited),
            })
        })
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
