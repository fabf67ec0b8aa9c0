//! RingMQ's core: the shard (one per core, on `ring-runtime`) and what the shards share.
//!
//! A [`shard::BrokerShard`] owns its connections and their sans-I/O machine, its sessions,
//! its replica of the replicated state, its routes and its timers; it decodes with `codec`,
//! matches with `router`, keeps sessions with `session-store`, asks `access` who may do what,
//! and reaches the cluster link and the bridges only through `broker-api`'s ports. The shards
//! share a [`shared::Shared`] (the core's settings, counters, the session directory, the change
//! order and the broker-wide budgets) and exchange [`message::ShardMsg`] batches.
//!
//! This crate knows nothing of the config file, the command line, the operations listener,
//! NATS or the bridges' sockets: `ringmq` (crates/broker-bin) parses the configuration into
//! [`settings::CoreConfig`] and composes the broker.
#![forbid(unsafe_code)]

pub mod abuse;
pub mod admin_query;
pub mod alias;
pub mod auth;
mod carry;
pub mod cluster_inbox;
pub mod conn;
pub mod deal;
pub mod delayed;
pub mod detach;
pub mod directory;
pub mod exclusive;
pub mod guard;
pub mod lifecycle;
pub mod message;
pub mod metrics;
pub mod outbound;
pub mod session;
pub mod settings;
pub mod shard;
pub mod shared;
pub mod shared_parts;
pub mod slow;
pub mod store;
pub mod swap;
pub mod topic_rules;
pub mod trace;
