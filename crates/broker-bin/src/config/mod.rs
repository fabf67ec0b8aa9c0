//! Broker configuration: the embedded defaults, an optional file over them, then CLI overrides,
//! validated into typed values (two phases: [`raw`] then [`typed`]).
//!
//! Each section file (`runtime.rs`, `limits.rs`, `auth.rs`, ...) defines its raw struct, its
//! typed settings and its validation, importing only the leaves (`error.rs`, `fields.rs`,
//! `overlay.rs`) and sections it needs; `raw.rs`, `typed.rs` and `validate.rs` put the sections
//! together and are imported by none of them.

mod abuse;
mod auth;
mod auth_backends;
mod auto_subscribe;
mod bridges;
mod cluster;
mod delayed;
mod error;
mod fields;
mod http;
mod ip;
mod limits;
mod listeners;
mod log;
mod overlay;
mod persistence;
mod print;
mod raw;
mod rewrite;
mod runtime;
mod sessions;
mod slow;
mod sys;
mod traces;
mod typed;
mod validate;
mod webhooks;

pub use auth::{AuthSettings, BackendKind, JwtConfig};
pub use bridges::{
    BridgeSettings, BridgeTls, Direction, RawBridge, RawBridgeTopic, Secret, TopicRule,
};
pub use cluster::{ClusterSettings, NatsSecurity};
pub use error::ConfigError;
pub use http::{AllowedHosts, BasicCredentials, HostName, HttpSettings};
pub use listeners::{ListenerKind, ListenerSettings, TlsSettings, TransportListener};
pub use print::{effective_toml, redacted_toml};
pub use raw::{DEFAULT_CONFIG_TOML, RawConfig, default_raw, load_raw, parse_raw};
pub use typed::Config;
// The core's settings, validated here (the section files above check their keys).
pub use crate::settings::{
    BackendChoice, ConnectionSettings, CoreConfig, LimitSettings, LogFormat, LogSettings,
    OverloadSettings, PersistenceSettings, PublishRates, QueueSettings, RetainedSettings,
    RoutingSettings, RuntimeSettings, SessionSettings, SlowConsumerPolicy, StorageEngine,
    SyncPolicy, WritePacingChoice,
};
