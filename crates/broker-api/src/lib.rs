//! The thin interface between RingMQ's core (`broker-core`) and the features that plug into
//! it: the values they exchange, and nothing of the shard's internals. Feature crates depend on
//! this crate, never on the core; this crate depends on no RingMQ crate but `codec` (the
//! packets a [`Message`] carries) and `ring-runtime` (`ShardId`, `ConnId`).
//!
//! Its users: `broker-core` (the shards hold a [`ClusterPort`] and [`BridgeFigures`] in
//! `Shared::links`, and expose their mailboxes as a [`ClusterInbox`]); `bridge` ([`Secret`] in
//! its settings, [`BridgeStats`], and its board as [`BridgeFigures`]); `cluster` ([`Message`],
//! the [`cluster`] types, [`ClusterInbox`], [`ClusterPort`], [`ClusterFigures`], [`Reply`],
//! and [`redact_url`] for the NATS servers it logs);
//! `access` ([`redact_url`] in its backends' errors); and `ringmq`, which wires them together
//! (and prints the configuration with [`redact_url`] and [`REDACTED`]).
//!
//! - [`BridgeStats`] and [`BridgeFigures`]: the bridges' figures, read for `$SYS`.
//! - [`BrokerEvent`] and [`EventHook`]: what happened (connections, subscriptions, publishes,
//!   drops), for a hook that reports it elsewhere (`webhooks`).
//! - [`Message`]: one published message, encoded once and shared by every copy.
//! - [`cluster`]: what the shards and the cluster link exchange, and the [`ClusterInbox`] the
//!   link posts into.
//! - [`ClusterPort`]: the cluster link as the shards see it, and its [`ClusterFigures`].
//! - [`OwnLinks`]: the source addresses of the broker's own links to itself (the bridges'),
//!   which the `[ip]` guard neither limits nor bans.
//! - [`Reply`]: an answer a side thread waits for, sent once by a shard.
//! - [`Secret`]: a credential from the configuration, kept out of `Debug` output;
//!   [`redact_url`]: a URL with the credentials in its userinfo replaced by [`REDACTED`], for
//!   logs, errors and the printed configuration.

#![forbid(unsafe_code)]

mod bridge_stats;
pub mod cluster;
mod cluster_figures;
mod events;
mod message;
mod own_links;
mod reply;
mod secret;

pub use bridge_stats::{BridgeFigures, BridgeStats};
pub use bytes::Bytes;
pub use cluster::{ClusterInbound, ClusterInbox, ClusterPort, PostRefused};
pub use cluster_figures::{ClusterFigures, ClusterNode};
pub use events::{BrokerEvent, EventHook, EventHookFigures, EventKind};
pub use message::{Expiry, Message};
pub use own_links::{OwnLink, OwnLinks};
pub use reply::Reply;
pub use secret::{REDACTED, Secret, redact_url};
