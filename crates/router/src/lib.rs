//! Topic names and filters, the subscription table, shared subscriptions and retained matching.
//!
//! Pure and deterministic: no I/O, no clock, no locks on the match path.
#![forbid(unsafe_code)]
