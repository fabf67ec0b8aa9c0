//! The raw configuration layer: TOML as written, every field optional so files can be overlaid.
//! The whole file ([`RawConfig`]; each section's struct lives in that section's file) and how
//! it is loaded: the embedded defaults, then a file over them.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::abuse::RawOverload;
use super::auth::RawAuth;
use super::auto_subscribe::RawAutoSubscribe;
use super::bridges::RawBridge;
use super::cluster::RawCluster;
use super::delayed::RawDelayed;
use super::error::ConfigError;
use super::http::RawHttp;
use super::ip::RawIp;
use super::limits::{RawConnection, RawLimits};
use super::listeners::RawListeners;
use super::log::RawLog;
use super::overlay::{overlay_table, set_if_some};
use super::persistence::RawPersistence;
use super::rewrite::RawRewrite;
use super::runtime::RawRuntime;
use super::sessions::{RawQueues, RawRetained, RawRouting, RawSessions};
use super::slow::RawSlowSubscribers;
use super::sys::RawSys;
use super::traces::RawTraces;
use super::webhooks::RawWebhook;

/// The whole raw configuration file.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub listeners: RawListeners,
    #[serde(default)]
    pub runtime: RawRuntime,
    #[serde(default)]
    pub log: RawLog,
    #[serde(default)]
    pub connection: RawConnection,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub routing: RawRouting,
    #[serde(default)]
    pub queues: RawQueues,
    #[serde(default)]
    pub sessions: RawSessions,
    #[serde(default)]
    pub retained: RawRetained,
    #[serde(default)]
    pub delayed: RawDelayed,
    #[serde(default)]
    pub slow_subscribers: RawSlowSubscribers,
    #[serde(default)]
    pub traces: RawTraces,
    #[serde(default)]
    pub sys: RawSys,
    #[serde(default)]
    pub persistence: RawPersistence,
    #[serde(default)]
    pub auth: RawAuth,
    #[serde(default)]
    pub ip: RawIp,
    #[serde(default)]
    pub overload: RawOverload,
    /// `[[bridges]]`: a later file's list replaces the earlier one whole.
    #[serde(default)]
    pub bridges: Option<Vec<RawBridge>>,
    #[serde(default)]
    pub http: RawHttp,
    /// `[cluster]`: absent on a single node (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<RawCluster>,
    /// `[[auto_subscribe]]`: a later file's list replaces the earlier one whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_subscribe: Option<Vec<RawAutoSubscribe>>,
    /// `[[rewrite]]`: a later file's list replaces the earlier one whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<Vec<RawRewrite>>,
    /// `[[webhooks]]`: a later file's list replaces the earlier one whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhooks: Option<Vec<RawWebhook>>,
}

impl RawConfig {
    /// Takes every field that `over` sets, section by section.
    pub fn overlay(&mut self, over: RawConfig) {
        self.listeners.overlay(over.listeners);
        self.runtime.overlay(over.runtime);
        self.log.overlay(over.log);
        self.connection.overlay(over.connection);
        self.limits.overlay(over.limits);
        self.routing.overlay(over.routing);
        self.queues.overlay(over.queues);
        self.sessions.overlay(over.sessions);
        self.retained.overlay(over.retained);
        self.delayed.overlay(over.delayed);
        self.slow_subscribers.overlay(over.slow_subscribers);
        self.traces.overlay(over.traces);
        self.sys.overlay(over.sys);
        self.persistence.overlay(over.persistence);
        self.auth.overlay(over.auth);
        self.ip.overlay(over.ip);
        self.overload.overlay(over.overload);
        set_if_some(&mut self.bridges, over.bridges);
        self.http.overlay(over.http);
        overlay_table(&mut self.cluster, over.cluster, RawCluster::overlay);
        set_if_some(&mut self.webhooks, over.webhooks);
        set_if_some(&mut self.rewrite, over.rewrite);
        set_if_some(&mut self.auto_subscribe, over.auto_subscribe);
    }
}

/// The default configuration, embedded in the binary; every default lives here.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("../../../../configs/default.toml");

/// Parses TOML text into the raw layer; `origin` names the text in errors.
pub fn parse_raw(origin: &str, text: &str) -> Result<RawConfig, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse {
        origin: origin.to_owned(),
        message: e.to_string(),
    })
}

/// The embedded defaults as a raw layer.
pub fn default_raw() -> Result<RawConfig, ConfigError> {
    parse_raw("<embedded default>", DEFAULT_CONFIG_TOML)
}

/// The embedded defaults overlaid with `path`'s keys, when a path is given.
pub fn load_raw(path: Option<&Path>) -> Result<RawConfig, ConfigError> {
    let mut raw = default_raw()?;
    if let Some(path) = path {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        raw.overlay(parse_raw(&path.display().to_string(), &text)?);
    }
    Ok(raw)
}
