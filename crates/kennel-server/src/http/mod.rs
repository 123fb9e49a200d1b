//! The HTTP layer's defences: labels from closed sets, the Host and
//! Origin guard, bounded bodies, and the accept loop with its timeouts
//! and connection budget (ADR 0020).

pub(crate) mod body;
pub(crate) mod front;
pub(crate) mod host;
pub(crate) mod labels;
pub(crate) mod limits;
pub(crate) mod listen;

mod stall;
mod timer;

pub(crate) use self::body::BodyGate;
pub use self::host::HostPolicy;
pub(crate) use self::limits::ConnectionBudget;
pub(crate) use self::listen::bind;
pub use self::listen::{ConnOptions, serve};
