//! Broker configuration: the embedded defaults, an optional file over them, then CLI overrides,
//! validated into typed values (two phases: [`raw`] then [`typed`]).

mod abuse;
mod auth;
mod auth_backends;
mod bridges;
mod cluster;
mod error;
mod fields;
mod http;
mod ip;
mod listeners;
mod log;
mod overlay;
mod print;
mod raw;
mod typed;
mod validate;

use std::path::Path;

pub use abuse::{OverloadSettings, PublishRates};
pub use auth::{AuthSettings, BackendKind, JwtConfig};
pub use bridges::{
    BridgeSettings, BridgeTls, Direction, RawBridge, RawBridgeTopic, Secret, TopicRule,
};
pub use cluster::{ClusterSettings, NatsSecurity};
pub use error::ConfigError;
pub use http::{BasicCredentials, HttpSettings};
pub use listeners::{ListenerKind, ListenerSettings, TlsSettings, TransportListener};
pub use log::{LogFormat, LogSettings};
pub use print::{effective_toml, redacted_toml};
pub use raw::RawConfig;
pub use typed::{
    BackendChoice, Config, ConnectionSettings, LimitSettings, PersistenceSettings, QueueSettings,
    RetainedSettings, RoutingSettings, RuntimeSettings, SessionSettings, SlowConsumerPolicy,
    StorageEngine, SyncPolicy, WritePacingChoice,
};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_validates() {
        let config = default_raw().unwrap().validate().unwrap();
        assert_eq!(
            config.listeners.tcp,
            vec!["127.0.0.1:1883".parse().unwrap()]
        );
        assert!(config.listeners.transports.is_empty());
        assert_eq!(config.runtime.backend, BackendChoice::Auto);
        assert_eq!(config.limits.max_packet_size, 1_048_576);
        assert_eq!(
            config.runtime.write_interval,
            std::time::Duration::from_millis(10)
        );
        assert_eq!(config.runtime.write_pacing, WritePacingChoice::Adaptive);
        assert_eq!(config.runtime.sched_slice, None, "the kernel's own slice");
        assert_eq!(
            config.runtime.listen_backlog, None,
            "0: the kernel's maximum"
        );
        assert_eq!(
            (config.runtime.recv_buffers, config.runtime.recv_buffer_size),
            (512, 16384),
            "the runtime's own defaults"
        );
        assert_eq!(
            config.runtime.accept_backoff,
            std::time::Duration::from_millis(100)
        );
        assert_eq!(
            config.limits.free_memory_hold,
            std::time::Duration::from_secs(1)
        );
    }

    #[test]
    fn file_overrides_only_its_keys() {
        let mut raw = default_raw().unwrap();
        raw.overlay(parse_raw("t", "[limits]\nreceive_maximum = 10\n").unwrap());
        let config = raw.validate().unwrap();
        assert_eq!(config.limits.receive_maximum, 10);
        assert_eq!(config.limits.max_packet_size, 1_048_576);
    }

    #[test]
    fn a_scheduler_slice_in_the_kernels_range_is_taken() {
        let mut raw = default_raw().unwrap();
        raw.overlay(parse_raw("t", "[runtime]\nsched_slice_us = 100\n").unwrap());
        assert_eq!(
            raw.validate().unwrap().runtime.sched_slice,
            Some(std::time::Duration::from_micros(100))
        );
    }

    #[test]
    fn shard_threads_are_pinned_unless_the_file_says_not() {
        let mut raw = default_raw().unwrap();
        assert!(raw.validate().unwrap().runtime.pin_threads);
        raw.overlay(parse_raw("t", "[runtime]\npin_threads = false\n").unwrap());
        assert!(!raw.validate().unwrap().runtime.pin_threads);
        let error = error_for("[runtime]\npin_threads = \"no\"\n");
        assert!(error.contains("pin_threads"), "{error}");
    }

    fn error_for(text: &str) -> String {
        let mut raw = default_raw().unwrap();
        match parse_raw("t", text) {
            Err(e) => e.to_string(),
            Ok(over) => {
                raw.overlay(over);
                raw.validate().unwrap_err().to_string()
            }
        }
    }

    #[test]
    fn errors_name_the_key() {
        assert!(error_for("[limits]\nreceive_maximum = 0\n").contains("limits.receive_maximum"));
        assert!(error_for("[limits]\nreceive_maximum = 70000\n").contains("out of range"));
        assert!(error_for("[runtime]\nbackend = \"kqueue\"\n").contains("runtime.backend"));
        assert!(
            error_for("[runtime]\nwrite_interval_us = 2000000\n")
                .contains("runtime.write_interval_us")
        );
        assert!(
            error_for("[runtime]\nwrite_pacing = \"sometimes\"\n").contains("runtime.write_pacing")
        );
        for slice in [1, 99, 100_001] {
            let error = error_for(&format!("[runtime]\nsched_slice_us = {slice}\n"));
            assert!(error.contains("runtime.sched_slice_us"), "{error}");
            assert!(error.contains("100..=100000"), "{error}");
        }
        assert!(
            error_for("[runtime]\ncoalesce_below = 1000000\n").contains("runtime.coalesce_below")
        );
        assert!(
            error_for("[runtime]\nspare_send_queues = 100000\n")
                .contains("runtime.spare_send_queues")
        );
        assert!(
            error_for("[runtime]\nlisten_backlog = -1\n").contains("listen_backlog")
                && error_for("[runtime]\nlisten_backlog = 2000000\n")
                    .contains("runtime.listen_backlog")
        );
        assert!(
            error_for("[runtime]\naccept_backoff_ms = 0\n").contains("runtime.accept_backoff_ms")
        );
        assert!(error_for("[runtime]\nrecv_buffers = 100\n").contains("runtime.recv_buffers"));
        assert!(error_for("[runtime]\nrecv_buffers = 65536\n").contains("runtime.recv_buffers"));
        assert!(
            error_for("[runtime]\nrecv_buffer_size = 100\n").contains("runtime.recv_buffer_size")
        );
        assert!(error_for("[listeners]\ntcp = []\n").contains("listeners.tcp"));
        assert!(error_for("[listeners]\ntcp = [\"nonsense\"]\n").contains("listeners.tcp"));
        assert!(error_for("[log]\nlevel = \"loud\"\n").contains("log.level"));
        assert!(error_for("[limits]\nmax_connect_size = 10\n").contains("limits.max_connect_size"));
        assert!(
            error_for("[limits]\nmax_partial_frame_bytes = 1000\n")
                .contains("limits.max_partial_frame_bytes")
        );
        assert!(
            error_for("[queues]\nslow_consumer_policy = \"x\"\n")
                .contains("queues.slow_consumer_policy")
        );
        assert!(
            error_for("[limits]\nfree_memory_hold_ms = 60001\n")
                .contains("limits.free_memory_hold_ms")
        );
        let log_max_below_log = error_for("[persistence]\nlog_mb = 128\nlog_max_mb = 64\n");
        assert!(
            log_max_below_log.contains("persistence.log_max_mb")
                && log_max_below_log.contains("below persistence.log_mb")
        );
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused() {
        assert!(error_for("[limits]\nmax_pakcet_size = 10\n").contains("max_pakcet_size"));
        assert!(error_for("[limits]\nreceive_maximum = \"ten\"\n").contains("receive_maximum"));
        assert!(error_for("[nosuch]\n").contains("nosuch"));
    }
}
