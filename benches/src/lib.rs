//! Criterion benchmarks live in `benches/benches/`; this library is empty.
#![forbid(unsafe_code)]
