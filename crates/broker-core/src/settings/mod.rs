//! The validated settings of the broker's core: what the shards, the store and the door
//! read. The binary's config layer parses TOML, validates it with key names in its errors, and
//! builds these; the features' own settings (`[cluster]`, `[[bridges]]`, `[http]`) stay with them.

mod abuse;
mod delayed;
mod limits;
mod log;
mod persistence;
mod runtime;
mod sessions;
mod slow;

use std::time::Duration;

pub use abuse::{OverloadSettings, PublishRates};
pub use delayed::{DelayedSettings, MAX_DELAY_SECONDS};
pub use limits::{ConnectionSettings, LimitSettings};
pub use log::{LogFormat, LogSettings};
pub use persistence::{PersistenceSettings, StorageEngine, SyncPolicy};
pub use runtime::{BackendChoice, RuntimeSettings, WritePacingChoice};
pub use sessions::{
    AutoSubscription, QueueSettings, RetainedSettings, RoutingSettings, SessionSettings,
    SlowConsumerPolicy, requested_expiry_interval,
};
pub use slow::SlowSubscriberSettings;

use crate::guard::IpSettings;

/// The validated settings of the broker's core.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub listeners: transport::ListenerSettings,
    pub runtime: RuntimeSettings,
    /// `[log]` format and lifecycle-line bound.
    pub log: LogSettings,
    pub connection: ConnectionSettings,
    pub limits: LimitSettings,
    pub routing: RoutingSettings,
    pub queues: QueueSettings,
    pub sessions: SessionSettings,
    pub retained: RetainedSettings,
    /// `[delayed]`: delayed publish.
    pub delayed: DelayedSettings,
    /// `[traces]`: the bounds of live traces.
    pub traces: crate::trace::TraceLimits,
    /// `[slow_subscribers]`: the slow-subscriber rankings.
    pub slow_subscribers: SlowSubscriberSettings,
    /// Interval between `$SYS` updates; `None` disables `$SYS`.
    pub sys_interval: Option<Duration>,
    pub persistence: PersistenceSettings,
    pub auth: access::settings::AuthSettings,
    pub ip: IpSettings,
    /// `[limits] max_publish_rate`, `max_publish_bytes_rate` (reloadable).
    pub publish_rates: PublishRates,
    /// `[overload]` (reloadable).
    pub overload: OverloadSettings,
    /// The operations listener serves `/metrics`: the shards keep their gauges fresh even
    /// with `$SYS` off.
    pub metrics_served: bool,
}

/// How often the gauges that cost a walk over the sessions are refreshed when `$SYS` is off
/// but the operations HTTP listener is on.
pub const GAUGE_INTERVAL: Duration = Duration::from_secs(5);

impl CoreConfig {
    /// The gauge tick: `sys.interval`, else [`GAUGE_INTERVAL`] when `/metrics` is served.
    pub fn gauge_interval(&self) -> Option<Duration> {
        self.sys_interval
            .or_else(|| self.metrics_served.then_some(GAUGE_INTERVAL))
    }
}
