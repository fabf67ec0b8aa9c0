//! The broker's side of the operations listener (the `ops` crate): [`OpsState`] answers its
//! [`ops::OpsPort`] with the metrics document built from every crate's figures
//! (`collect.rs`, `collect_cluster.rs`), health and readiness from the shards' exits and the
//! broker's lifecycle, and the admin API through [`admin::AdminPort`].

mod collect;
mod collect_cluster;
mod collect_events;
mod collect_quic;
mod collect_slow;
mod port;
mod state;

pub use state::{Lifecycle, OpsState};
