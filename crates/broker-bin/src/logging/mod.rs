//! Logging: the `tracing` subscriber the binary installs (`[log]`: level, text or JSON, colour
//! only on a terminal), a handle that changes the level while the broker runs (SIGHUP), and
//! the rate-limited connection lifecycle lines (`broker_core::lifecycle`).

use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

use crate::config::{Config, LogFormat};

pub use broker_core::lifecycle::{self, Lifecycle, LifecycleLog};

/// Why the log subscriber could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("installing the log subscriber: {0}")]
pub struct LogInitError(#[from] tracing_subscriber::util::TryInitError);

/// Why a new log level was not put in force.
#[derive(Debug, thiserror::Error)]
pub enum LogLevelError {
    /// `RUST_LOG` chose the filter at start and keeps it.
    #[error("RUST_LOG is set and overrides log.level")]
    FromEnvironment,
    /// No control was handed to the broker (it runs as a library, without `init`).
    #[error("no log subscriber to change (the broker runs without ringmq's own)")]
    NoControl,
    /// The subscriber is gone (it cannot be while the process runs).
    #[error("changing the log filter: {0}")]
    Reload(#[from] reload::Error),
}

/// Changes the level of the installed log filter while the broker runs.
pub struct LogControl {
    handle: reload::Handle<EnvFilter, Registry>,
    /// `RUST_LOG` set the filter: `log.level` changes are not applied.
    from_env: bool,
    /// Keeps a filter that no subscriber owns alive ([`LogControl::detached`]).
    _detached: Option<reload::Layer<EnvFilter, Registry>>,
}

impl std::fmt::Debug for LogControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogControl")
            .field("filter", &self.filter())
            .field("from_env", &self.from_env)
            .finish()
    }
}

impl LogControl {
    /// A control over a filter no subscriber uses, starting at `level` (tests check what a
    /// reload puts in force without installing a global subscriber).
    pub fn detached(level: tracing::Level) -> Self {
        let (layer, handle) = reload::Layer::new(level_filter(level));
        Self {
            handle,
            from_env: false,
            _detached: Some(layer),
        }
    }

    /// Puts `level` in force for every later event (all targets), unless `RUST_LOG` chose the
    /// filter at start.
    pub fn set_level(&self, level: tracing::Level) -> Result<(), LogLevelError> {
        if self.from_env {
            return Err(LogLevelError::FromEnvironment);
        }
        self.handle.reload(level_filter(level))?;
        Ok(())
    }

    /// The filter in force, as `RUST_LOG` would write it (`None` if the subscriber is gone).
    pub fn filter(&self) -> Option<String> {
        self.handle.with_current(ToString::to_string).ok()
    }
}

/// Installs the process's log subscriber on stderr: `RUST_LOG` when set, else `log.level`;
/// `log.format` text (ANSI colours only when stderr is a terminal) or JSON lines.
pub fn init(config: &Config) -> Result<LogControl, LogInitError> {
    let (filter, from_env) = match EnvFilter::try_from_default_env() {
        Ok(filter) => (filter, true),
        Err(_) => (level_filter(config.log_level), false),
    };
    let (filter, handle) = reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    let stderr = std::io::stderr;
    match config.log.format {
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(stderr)
                    .with_ansi(std::io::stderr().is_terminal()),
            )
            .try_init()?,
        LogFormat::Json => registry
            .with(tracing_subscriber::fmt::layer().json().with_writer(stderr))
            .try_init()?,
    }
    Ok(LogControl {
        handle,
        from_env,
        _detached: None,
    })
}

/// Every target at `level`, but the NATS client at most at info: its debug lines name the
/// servers with the credentials in their URLs (`RUST_LOG` can still ask for them).
fn level_filter(level: tracing::Level) -> EnvFilter {
    let level = level.as_str().to_ascii_lowercase();
    if matches!(level.as_str(), "debug" | "trace") {
        EnvFilter::new(format!("{level},async_nats=info"))
    } else {
        EnvFilter::new(level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_control_changes_its_level() {
        let control = LogControl::detached(tracing::Level::INFO);
        assert_eq!(control.filter().as_deref(), Some("info"));
        control.set_level(tracing::Level::DEBUG).unwrap();
        assert_eq!(control.filter().as_deref(), Some("async_nats=info,debug"));
    }
}
