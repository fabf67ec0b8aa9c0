//! [`ReloadState`]: what reloads need besides the shared state (the log level's control, the
//! configuration in force, where a reload reads the configuration, what the admin API shows).
//! Held (one `Arc`) by the `Broker` and its admin API's `AdminPort`, not by the shared state;
//! `mod.rs` applies a reload with it.

use std::sync::{Mutex, OnceLock};

use crate::config::{Config, ConfigError, RawConfig};
use crate::logging::{LogControl, LogLevelError};

/// What reloads need besides the shared state: the log level's control and the configuration
/// whose live keys are in force.
pub(crate) struct ReloadState {
    log: OnceLock<LogControl>,
    pub(super) in_force: Mutex<Config>,
    /// The configuration the broker started with: the keys that need a restart still follow it.
    pub(super) started: Config,
    /// Where a reload reads the configuration (the binary: file and flags).
    pub(super) source: OnceLock<ConfigSource>,
    /// What the admin API shows: the last configuration loaded, as TOML, and the keys of it
    /// that wait for a restart.
    view: Mutex<ConfigView>,
    /// Applies `[[bridges]]` (the broker's bridge threads, which the shared state cannot own).
    pub(super) bridges: OnceLock<BridgeUpdate>,
}

/// Starts, stops and restarts bridges for a new configuration.
pub(crate) type BridgeUpdate = Box<dyn Fn(&Config) + Send + Sync>;

/// Reads the configuration again: the raw layers and their validation.
pub type ConfigSource = Box<dyn Fn() -> Result<(RawConfig, Config), ConfigError> + Send + Sync>;

/// The configuration as the admin API shows it.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ConfigView {
    /// The last configuration loaded (at start or by a reload), every key, as TOML; `None`
    /// when the broker was started without a source (embedded in a program).
    pub toml: Option<String>,
    /// Keys of it that differ from the running configuration and take effect at the next
    /// start.
    pub restart_required: Vec<&'static str>,
}

impl std::fmt::Debug for ReloadState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadState").finish_non_exhaustive()
    }
}

impl ReloadState {
    /// The state of a broker started with `config`.
    pub(crate) fn new(config: Config) -> Self {
        Self {
            log: OnceLock::new(),
            started: config.clone(),
            in_force: Mutex::new(config),
            source: OnceLock::new(),
            view: Mutex::new(ConfigView::default()),
            bridges: OnceLock::new(),
        }
    }

    /// Sets how reloads apply `[[bridges]]`.
    pub(crate) fn set_bridge_update(&self, update: BridgeUpdate) {
        let _ = self.bridges.set(update);
    }

    /// Sets where reloads read the configuration; `raw` and `config` are what the broker
    /// started with.
    pub(crate) fn set_source(&self, raw: &RawConfig, source: ConfigSource) {
        if self.source.set(source).is_ok() {
            self.lock_view().toml = crate::config::redacted_toml(raw, &self.started).ok();
        }
    }

    /// The configuration as the admin API shows it.
    pub(crate) fn view(&self) -> ConfigView {
        self.lock_view().clone()
    }

    pub(super) fn lock_view(&self) -> std::sync::MutexGuard<'_, ConfigView> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands over the control of the log level; a second one is returned, unused.
    pub(crate) fn set_log_control(&self, control: LogControl) -> Result<(), LogControl> {
        self.log.set(control)
    }

    /// The log filter in force, when a control was handed over.
    pub(crate) fn log_filter(&self) -> Option<String> {
        self.log.get()?.filter()
    }

    pub(super) fn set_level(&self, level: tracing::Level) -> Result<(), LogLevelError> {
        let control = self.log.get().ok_or(LogLevelError::NoControl)?;
        control.set_level(level)
    }
}

/// The admin API's `/api/v1/reload` and `/api/v1/config`.
impl admin::LiveConfig for ReloadState {
    fn reload(&self, shared: &crate::shared::Shared) -> admin::Reloaded {
        let report = self.reload_from_source(shared);
        report.log("admin API");
        admin::Reloaded {
            clean: report.refused.is_none() && report.errors.is_empty(),
            report: serde_json::to_value(&report).unwrap_or_default(),
        }
    }

    fn view(&self) -> serde_json::Value {
        serde_json::to_value(ReloadState::view(self)).unwrap_or_default()
    }
}
