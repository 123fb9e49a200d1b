//! The HTTP layer's defences: labels from closed sets, the Host and
//! Origin guard, bounded bodies, and the accept loop with its timeouts
//! and connection budget (ADR 0020).

pub mod body;
pub(crate) mod front;
pub mod host;
pub mod labels;
pub mod limits;
pub mod listen;

mod stall;
mod timer;

pub use self::body::{BodyGate, BodyPermit};
pub use self::host::HostPolicy;
pub use self::limits::ConnectionBudget;
pub use self::listen::{ConnOptions, bind, serve};
