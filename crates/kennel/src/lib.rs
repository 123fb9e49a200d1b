//! kennel lends long-lived, costly-to-start workers to jobs, one job per
//! worker at a time.

mod computer;
mod error;
mod system_computer;
mod worker;

pub use crate::computer::{Computer, SystemComputer, TestComputer};
pub use crate::error::{BuildError, Error, RejectReason};
pub use crate::worker::{BoxError, Exit, ExitSignal, ExitStatus, Exited, Killer, Worker};
