//! The validated configuration: the core's settings ([`CoreConfig`], which every field of the
//! core reads through [`Config`]'s `Deref`), the log level, and the features' own sections.

use std::ops::{Deref, DerefMut};

use super::bridges::BridgeSettings;
use super::cluster::ClusterSettings;
use super::http::HttpSettings;
use crate::settings::CoreConfig;

/// The validated broker configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// What the shards, the store and the door read.
    pub core: CoreConfig,
    pub log_level: tracing::Level,
    /// `[cluster]`: `None` on a single node.
    pub cluster: Option<ClusterSettings>,
    /// `[[bridges]]` (reloadable: added, removed and changed bridges start, stop, restart).
    pub bridges: Vec<BridgeSettings>,
    /// `[http]`: the operations HTTP listener.
    pub http: HttpSettings,
    /// `[[webhooks]]` (read at start).
    pub webhooks: Vec<webhooks::WebhookSettings>,
}

/// The core's sections read as the configuration's own (`config.limits`, `config.queues`).
impl Deref for Config {
    type Target = CoreConfig;

    fn deref(&self) -> &CoreConfig {
        &self.core
    }
}

impl DerefMut for Config {
    fn deref_mut(&mut self) -> &mut CoreConfig {
        &mut self.core
    }
}
