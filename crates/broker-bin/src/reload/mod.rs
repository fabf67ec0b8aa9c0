//! Reloading the configuration while the broker runs (SIGHUP, the admin API): what can change
//! live is put in force, what cannot is compared with the running configuration and reported,
//! never silently ignored, and a configuration that does not load is refused whole.

mod keys;
mod report;
mod state;

use crate::config::{Config, ConfigError};
use crate::shared::Shared;

pub use report::ReloadReport;
pub(crate) use state::ReloadState;
pub use state::{ConfigSource, ConfigView};

impl ReloadState {
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
        shared.door.guard.update(new.ip.clone());
        shared.door.abuse.update(new);
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
        report.restart_required = keys::changed(keys::RESTART, &self.started, new);
        *in_force = new.clone();
        // A level not applied stays a change, reported (and tried) again at the next reload.
        in_force.log_level = level;
    }
}
