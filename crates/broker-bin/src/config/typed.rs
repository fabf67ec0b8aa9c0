//! The validated configuration: typed values only, every limit in force; each section's
//! settings are defined in that section's file.

use std::time::Duration;

use super::abuse::{OverloadSettings, PublishRates};
use super::auth::AuthSettings;
use super::bridges::BridgeSettings;
use super::cluster::ClusterSettings;
use super::http::HttpSettings;
use super::limits::{ConnectionSettings, LimitSettings};
use super::listeners::ListenerSettings;
use super::log::LogSettings;
use super::persistence::PersistenceSettings;
use super::runtime::RuntimeSettings;
use super::sessions::{QueueSettings, RetainedSettings, RoutingSettings, SessionSettings};
use crate::guard::IpSettings;

/// The validated broker configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub listeners: ListenerSettings,
    pub runtime: RuntimeSettings,
    pub log_level: tracing::Level,
    /// `[log]` format and lifecycle-line bound.
    pub log: LogSettings,
    pub connection: ConnectionSettings,
    pub limits: LimitSettings,
    pub routing: RoutingSettings,
    pub queues: QueueSettings,
    pub sessions: SessionSettings,
    pub retained: RetainedSettings,
    /// Interval between `$SYS` updates; `None` disables `$SYS`.
    pub sys_interval: Option<Duration>,
    pub persistence: PersistenceSettings,
    /// `[cluster]`: `None` on a single node.
    pub cluster: Option<ClusterSettings>,
    pub auth: AuthSettings,
    pub ip: IpSettings,
    /// `[limits] max_publish_rate`, `max_publish_bytes_rate` (reloadable).
    pub publish_rates: PublishRates,
    /// `[overload]` (reloadable).
    pub overload: OverloadSettings,
    /// `[[bridges]]` (reloadable: added, removed and changed bridges start, stop, restart).
    pub bridges: Vec<BridgeSettings>,
    /// `[http]`: the operations HTTP listener.
    pub http: HttpSettings,
}
