//! Turns a raw configuration into a typed [`Config`], section by section (each section's file
//! validates its own keys), naming the key of the first bad value.

use super::auto_subscribe;
use super::bridges;
use super::cluster;
use super::error::ConfigError;
use super::raw::RawConfig;
use super::rewrite;
use super::typed::Config;
use super::webhooks;
use crate::settings::CoreConfig;

impl RawConfig {
    /// Validates every key and builds the typed configuration.
    pub fn validate(&self) -> Result<Config, ConfigError> {
        let listeners = self.listeners.validate()?;
        // In the order the keys were always checked: the first bad one is the one named.
        let auth = self.auth.validate(&listeners)?;
        let ip = self.ip.validate()?;
        let publish_rates = self.limits.publish_rates()?;
        let overload = self.overload.validate()?;
        let bridges = bridges::validate(self.bridges.as_deref().unwrap_or_default(), &listeners)?;
        let http = self.http.validate()?;
        let cluster = self.cluster.as_ref().map(cluster::validate).transpose()?;
        let webhooks = webhooks::validate(self.webhooks.as_deref().unwrap_or_default())?;
        let core = CoreConfig {
            auth,
            ip,
            publish_rates,
            overload,
            metrics_served: http.enabled(),
            listeners,
            runtime: self.runtime.validate()?,
            log: {
                let _ = self.log.level()?;
                self.log.settings()?
            },
            connection: self.connection.validate()?,
            limits: self.limits.validate()?,
            routing: self.routing.validate(
                rewrite::validate(self.rewrite.as_deref().unwrap_or_default())?,
                auto_subscribe::validate(self.auto_subscribe.as_deref().unwrap_or_default())?,
            )?,
            queues: self.queues.validate()?,
            sessions: self.sessions.validate()?,
            retained: self.retained.validate()?,
            delayed: self.delayed.validate()?,
            slow_subscribers: self.slow_subscribers.validate()?,
            traces: self.traces.validate()?,
            sys_interval: self.sys.interval()?,
            persistence: self.persistence.validate()?,
        };
        Ok(Config {
            log_level: self.log.level()?,
            core,
            cluster,
            bridges,
            http,
            webhooks,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{BackendChoice, WritePacingChoice, default_raw, parse_raw};

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

    #[test]
    fn subscriptions_take_effect_once_handled_unless_the_file_asks_for_received() {
        let mut raw = default_raw().unwrap();
        assert!(!raw.validate().unwrap().runtime.strict_subscribe_order);
        raw.overlay(parse_raw("t", "[runtime]\nsubscribe_order = \"received\"\n").unwrap());
        assert!(raw.validate().unwrap().runtime.strict_subscribe_order);
        let error = error_for("[runtime]\nsubscribe_order = \"sent\"\n");
        assert!(error.contains("runtime.subscribe_order"), "{error}");
        assert!(error.contains("\"received\""), "{error}");
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
