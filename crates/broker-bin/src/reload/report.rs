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

    /// Writes the report to the log: one info line for what was reloaded, a warning per key
    /// that waits for a restart, an error per failure.
    pub fn log(&self, origin: &str) {
        if let Some(error) = &self.refused {
            tracing::error!(%error, "{origin}: the new configuration is refused; the running one stays");
        }
        tracing::info!(
            applied = ?self.applied,
            "{origin}: certificates, password file and ACL file read again; live settings applied"
        );
        for key in &self.restart_required {
            tracing::warn!("{origin}: {key} changed: takes effect at the next start");
        }
        for error in &self.errors {
            tracing::error!(%error, "{origin}: reload failed; the old one stays in use");
        }
    }
}
