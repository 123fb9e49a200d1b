//! Benchmarks of kennel against its peers; see `docs/BENCHMARKS.md`. The
//! bench targets live beside the crates they measure and are built here.
