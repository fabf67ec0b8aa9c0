//! Reloading the configuration while the broker runs (SIGHUP, the admin API): what can change
//! live is put in force, what cannot is compared with the running configuration and reported,
//! never silently ignored, and a configuration that does not load is refused whole.

mod keys;
mod report;

use std::sync::{Mutex, OnceLock};

use crate::config::{Config, ConfigError, RawConfig};
use crate::logging::{LogControl, LogLevelError};
use crate::shared::Shared;

pub use report::ReloadReport;

/// What reloads need besides the shared state: the log level's control and the configuration
/// whose live keys are in force.
pub(crate) struct ReloadState {
    log: OnceLock<LogControl>,
    in_force: Mutex<Config>,
    /// Where a reload reads the configuration (the binary: file and flags).
    source: OnceLock<ConfigSource>,
    /// What the admin API shows: the last configuration loaded, as TOML, and the keys of it
    /// that wait for a restart.
    view: Mutex<ConfigView>,
    /// Applies `[[bridges]]` (the broker's bridge threads, which the shared state cannot own).
    bridges: OnceLock<BridgeUpdate>,
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
    pub(crate) fn set_source(&self, raw: &RawConfig, config: &Config, source: ConfigSource) {
        if self.source.set(source).is_ok() {
            self.lock_view().toml = crate::config::redacted_toml(raw, config).ok();
        }
    }

    /// The configuration as the admin API shows it.
    pub(crate) fn view(&self) -> ConfigView {
        self.lock_view().clone()
    }

    fn lock_view(&self) -> std::sync::MutexGuard<'_, ConfigView> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the configuration from the source and reloads it; without a source, reloads
    /// the certificates, password file and ACL file only.
    pub(crate) fn reload_from_source(&self, shared: &Shared) -> ReloadReport {
        let Some(source) = self.source.get() else {
            return ReloadReport {
                errors: shared.reload_files(),
                ..Default::default()
            };
        };
        match source() {
            Ok((raw, config)) => {
                let report = self.reload_with(shared, &config);
                let mut view = self.lock_view();
                view.toml = crate::config::redacted_toml(&raw, &config).ok();
                view.restart_required = report.restart_required.clone();
                report
            }
            Err(error) => Self::refused(shared, &error),
        }
    }

    /// A reload with `config`, which loaded: the files are read again, its live keys put in
    /// force, the rest reported.
    pub(crate) fn reload_with(&self, shared: &Shared, config: &Config) -> ReloadReport {
        let mut report = ReloadReport {
            errors: shared.reload_files(),
            ..Default::default()
        };
        self.apply(shared, config, &mut report);
        report
    }

    /// A reload whose configuration did not load: refused whole; the files are still read
    /// again.
    pub(crate) fn refused(shared: &Shared, error: &ConfigError) -> ReloadReport {
        ReloadReport {
            refused: Some(error.to_string()),
            errors: shared.reload_files(),
            ..Default::default()
        }
    }

    /// Hands over the control of the log level; a second one is returned, unused.
    pub(crate) fn set_log_control(&self, control: LogControl) -> Result<(), LogControl> {
        self.log.set(control)
    }

    /// The log filter in force, when a control was handed over.
    pub(crate) fn log_filter(&self) -> Option<String> {
        self.log.get()?.filter()
    }

    /// Puts the live keys of `new` in force and records in `report` what changed: the live
    /// keys against the configuration in force, the others against the one the broker
    /// started with (`shared.config`, which they still follow).
    pub(crate) fn apply(&self, shared: &Shared, new: &Config, report: &mut ReloadReport) {
        let mut in_force = self.in_force.lock().unwrap_or_else(|e| e.into_inner());
        report.applied = keys::changed(keys::LIVE, &in_force, new);
        if in_force.bridges != new.bridges {
            report.applied.push("bridges");
        }
        if let Some(update) = self.bridges.get() {
            update(new);
        }
        shared.guard.update(new.ip.clone());
        shared.abuse.update(new);
        shared.lifecycle.set_limit(new.log.max_lifecycle_per_sec);
        let mut level = in_force.log_level;
        if new.log_level != level {
            match self.set_level(new.log_level) {
                Ok(()) => {
                    report.applied.push("log.level");
                    level = new.log_level;
                }
                Err(error) => report.errors.push(format!("log.level: {error}")),
            }
        }
        report.restart_required = keys::changed(keys::RESTART, &shared.config, new);
        *in_force = new.clone();
        // A level not applied stays a change, reported (and tried) again at the next reload.
        in_force.log_level = level;
    }

    fn set_level(&self, level: tracing::Level) -> Result<(), LogLevelError> {
        let control = self.log.get().ok_or(LogLevelError::NoControl)?;
        control.set_level(level)
    }
}
