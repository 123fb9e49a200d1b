//! What an operator reads of a running service, beside the jobs: the status
//! page, the pools' stats, live config and workers, the probes, the OpenAPI
//! description, and the order and help of the Prometheus families (the
//! routes are listed in [`app`](crate::app())).

pub(crate) mod config_get;
pub(crate) mod families;
pub(crate) mod openapi;
pub(crate) mod page;
pub(crate) mod pools;
pub(crate) mod probes;
pub(crate) mod workers;
