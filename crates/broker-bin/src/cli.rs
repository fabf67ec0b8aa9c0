//! The `ringmq` command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::{self, Config, ConfigError, RawConfig};

/// RingMQ: an MQTT 3.1.1 and 5.0 broker on thread-per-core io_uring reactors.
#[derive(Debug, Clone, Parser)]
#[command(name = "ringmq", version, about)]
pub struct Cli {
    /// TOML config file; its keys override the embedded defaults (see --print-default-config).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Address to accept MQTT connections on; repeatable; replaces `listeners.tcp`.
    #[arg(long, short = 'l', value_name = "ADDR:PORT")]
    pub listen: Vec<String>,

    /// Log level (error, warn, info, debug, trace); overrides `log.level`.
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// Print the embedded default configuration (every setting, documented) and exit.
    #[arg(long)]
    pub print_default_config: bool,

    /// Validate the configuration, print it with every key's effective value as TOML (usable as
    /// a config file) and exit; a bad value exits non-zero naming the key.
    #[arg(long)]
    pub check_config: bool,

    /// Tools instead of the broker.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What the binary runs instead of the broker.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// The persistence store: report on it, salvage a damaged one.
    #[command(subcommand)]
    Store(StoreCommand),
    /// SCRAM credentials for MQTT 5 enhanced authentication (`[auth.scram]`).
    #[command(subcommand)]
    Scram(ScramCommand),
}

/// `ringmq scram ...`: the SCRAM credential file.
#[derive(Debug, Clone, Subcommand)]
pub enum ScramCommand {
    /// Add a user to the credential file, or replace their line for this mechanism: the
    /// password is salted and hashed (PBKDF2) here, and only the derived keys are written.
    /// The password is read from --password, else from the first line of standard input.
    Add {
        /// The credential file (created when missing); a running broker reads it again on
        /// SIGHUP.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
        /// The username.
        #[arg(long)]
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-256")]
        mechanism: String,
        /// The PBKDF2 iteration count (4096 at least is advised).
        #[arg(long, default_value_t = access::scram::DEFAULT_ITERATIONS)]
        iterations: u32,
        /// The password (visible to other local users in the process list: prefer stdin).
        #[arg(long)]
        password: Option<String>,
    },
}

/// `ringmq store ...`: read the store directory only (a stopped broker's: stop it first).
#[derive(Debug, Clone, Subcommand)]
pub enum StoreCommand {
    /// Report what the store holds: its engine, files, epochs, any damage, what a start would
    /// load or why it would refuse, and what a salvage would keep. Exits 2 when damage is
    /// found.
    Check {
        /// The store directory (default: `persistence.dir` of the configuration).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Copy everything intact of the store into a new store of the same engine in a new or
    /// empty directory (never writing the damaged one), then open it as the broker would.
    /// Point `persistence.dir` at the new directory to start from it.
    Salvage {
        /// The damaged store directory (default: `persistence.dir` of the configuration).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The new store's directory: new or empty.
        #[arg(long, value_name = "DIR")]
        into: PathBuf,
    },
}

impl Cli {
    /// The raw layers in order: embedded defaults, the config file, then command-line overrides.
    pub fn raw_config(&self) -> Result<RawConfig, ConfigError> {
        let mut raw = config::load_raw(self.config.as_deref())?;
        if !self.listen.is_empty() {
            raw.listeners.tcp = Some(self.listen.clone());
        }
        if let Some(level) = &self.log_level {
            raw.log.level = Some(level.clone());
        }
        Ok(raw)
    }

    /// The validated configuration.
    pub fn config(&self) -> Result<Config, ConfigError> {
        self.raw_config()?.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_flags_replace_the_listener_list() {
        let cli = Cli::parse_from(["ringmq", "-l", "127.0.0.1:0", "--listen", "[::1]:1884"]);
        let config = cli.config().unwrap();
        assert_eq!(config.listeners.tcp.len(), 2);
        assert_eq!(config.listeners.tcp[1].port(), 1884);
    }

    #[test]
    fn bad_log_level_flag_names_the_key() {
        let cli = Cli::parse_from(["ringmq", "--log-level", "chatty"]);
        assert!(cli.config().unwrap_err().to_string().contains("log.level"));
    }

    #[test]
    fn missing_config_file_is_a_read_error() {
        let cli = Cli::parse_from(["ringmq", "--config", "/nonexistent/ringmq.toml"]);
        let err = cli.config().unwrap_err().to_string();
        assert!(err.contains("cannot read config file"), "{err}");
    }
}
