//! Reloading the configuration while the broker runs (SIGHUP, the admin API): what can change
//! live is put in force, what cannot is compared with the running configuration and reported,
//! never silently ignored, and a configuration that does not load is refused whole.

mod keys;
mod report;

use std::sync::{Mutex, OnceLock};

use crate::config::Config;
use crate::logging::{LogControl, LogLevelError};
use crate::shared::Shared;

pub use report::ReloadReport;

/// What reloads need besides the shared state: the log level's control and the configuration
/// whose live keys are in force.
#[derive(Debug)]
pub(crate) struct ReloadState {
    log: OnceLock<LogControl>,
    in_force: Mutex<Config>,
}

impl ReloadState {
    /// The state of a broker started with `config`.
    pub(crate) fn new(config: Config) -> Self {
        Self {
            log: OnceLock::new(),
            in_force: Mutex::new(config),
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
