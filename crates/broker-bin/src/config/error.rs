//! Configuration errors: each names the key and the problem.

use std::path::PathBuf;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not valid TOML or has an unknown key or a value of the wrong type.
    #[error("config file {origin}: {message}")]
    Parse { origin: String, message: String },
    /// A key has a value outside what RingMQ accepts.
    #[error("config key `{key}`: {problem}")]
    Invalid { key: &'static str, problem: String },
}

impl ConfigError {
    pub(crate) fn invalid(key: &'static str, problem: impl Into<String>) -> Self {
        Self::Invalid {
            key,
            problem: problem.into(),
        }
    }
}
