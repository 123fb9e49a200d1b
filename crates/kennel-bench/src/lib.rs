//! Benchmarks of kennel against its peers; see `docs/BENCHMARKS.md`. The
//! bench targets are in this package's `benches/`.
