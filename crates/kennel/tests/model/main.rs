//! A model-based property test of the pool: random sequences of lends, runs,
//! returns, `fail`s, aborts at each phase (a job dropped while it waits in the
//! queue, while it waits for a warm-up, while it runs), warm-ups that finish or
//! fail, workers that exit on their own (warming up, idle, lent), clock
//! advances (back-offs, evictions, workers that pass ten minutes) and
//! reconfigurations of the size, under each startup, on the paused clock.
//!
//! After every step the real pool is compared with a small reference model
//! written from the pool's documented rules (docs/concepts): which slot each
//! job gets (lowest idle slot, then a starting worker nobody awaits, then a new
//! worker in the lowest empty slot, then the FIFO queue), which job a freed
//! worker goes to (the oldest waiting one), which jobs are rejected or fail
//! their warm-up, which slots start and back off, and every count of `stats()`.
//! Checked also: each slot holds at most one live worker, so the live workers
//! never exceed the capacity (plus lent ones draining above a lowered
//! capacity); no worker is lent to two jobs; after `close()` no worker is
//! alive.
//!
//! Warm-ups are gated: a worker is ready only when the test says so, so the
//! order of events is the test's, not the scheduler's. A clock advance stops
//! at each timer's deadline in turn. Two back-offs due at the same instant
//! under `OrderedReady` or `LeaderFirst` would let the scheduler pick which
//! slot starts first; such an advance is not generated.
//!
//! `PROPTEST_CASES=N` runs N sequences (default 256).

mod bookkeeping;
mod check;
mod events;
mod machine;
mod reference;
mod sut;
