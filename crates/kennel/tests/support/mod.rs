//! An in-process fake worker whose warm-up, job time, exit and failure a
//! test controls, and helpers shared by the behaviour tests.
//!
//! One module a topic: [`fake`] the worker, [`farm`] its factory,
//! [`watched`] a fake that notes how it was ended, [`steer`] a sizing
//! steered by hand, [`pools`], [`jobs`] and [`events`] of fakes, and
//! [`clock`] for the paused clock. Their items are re-exported here: a
//! test names them `support::x`. The random suites' helpers are
//! [`sequences`] (`support::sequences::x`).
#![allow(dead_code, unreachable_pub, missing_docs)]

mod clock;
mod events;
mod fake;
mod farm;
mod jobs;
mod pools;
pub mod sequences;
mod steer;
mod watched;

// Each test binary uses some of these; to the others they are unused.
#[allow(unused_imports)]
pub use self::{
    clock::{advance, ms, secs, settle, within},
    events::{count, drain, names, retired},
    fake::{Fake, Health, Warmup},
    farm::Farm,
    jobs::{
        at_once, hold, spawn_close, spawn_lend_id, spawn_lend_slot, spawn_run_id, spawn_run_slot,
    },
    pools::{
        fixed, named_on_demand, named_parallel, on_demand, parallel, pool_of, ready, until_made,
    },
    steer::Steer,
    watched::{Ending, Endings, Watched},
};
