//! [`ReloadReport`]: what a reload did, for the log and for the admin API.

use serde::Serialize;

/// What one reload did. Nothing is silently ignored: every changed key is either applied or
/// listed as waiting for a restart, and every failure is listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReloadReport {
    /// The new configuration did not load or validate: why. None of it was applied (the
    /// certificates, password file and ACL file were still read again).
    pub refused: Option<String>,
    /// Keys whose new values are in force now (`ip.*`, the publish rates, `overload.*`,
    /// `log.level`, `log.max_lifecycle_per_sec`).
    pub applied: Vec<&'static str>,
    /// Keys whose values differ from the running ones but take effect only at the next start.
    pub restart_required: Vec<&'static str>,
    /// What failed to reload (a certificate, the password or ACL file, the log level); the old
    /// one stays in use.
    pub errors: Vec<String>,
}

impl ReloadReport {
    /// Whether the reload put everything in force: nothing refused, failed or waiting.
    pub fn is_complete(&self) -> bool {
        self.refused.is_none() && self.restart_required.is_empty() && self.errors.is_empty()
    }

    /// Writes the report to the log, saying only what is in force: a refused configuration
    /// is one error line (none of it applied); otherwise the live keys applied (when any;
    /// "partly" when something else waits or failed) and the files read again (when nothing
    /// failed). Then a warning per key that waits for a restart and an error per failure.
    pub fn log(&self, origin: &str) {
        match &self.refused {
            Some(error) => tracing::error!(
                %error,
                "{origin}: reload failed: the new configuration is refused; none of it is in force, the running one stays"
            ),
            None => self.log_in_force(origin),
        }
        for key in &self.restart_required {
            tracing::warn!("{origin}: {key} changed: takes effect at the next start");
        }
        for error in &self.errors {
            tracing::error!(%error, "{origin}: reload failed; the old one stays in use");
        }
    }

    /// The info lines of a configuration that loaded: its live keys applied, the files read
    /// again; each only when true.
    fn log_in_force(&self, origin: &str) {
        if !self.applied.is_empty() {
            if self.is_complete() {
                tracing::info!(applied = ?self.applied, "{origin}: live settings applied");
            } else {
                tracing::info!(
                    applied = ?self.applied,
                    "{origin}: reload partly applied: only these live settings are in force"
                );
            }
        }
        if self.errors.is_empty() {
            tracing::info!("{origin}: certificates, password file and ACL file read again");
        }
    }
}
