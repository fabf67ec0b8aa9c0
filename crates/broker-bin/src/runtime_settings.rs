//! The runtime settings (`ring_runtime::RuntimeConfig`) a broker config asks for.

use ring_runtime::RuntimeConfig;

use crate::config::{BackendChoice, Config, WritePacingChoice};

/// The runtime settings for a broker config.
pub(crate) fn runtime_config(config: &Config) -> RuntimeConfig {
    let mut runtime = RuntimeConfig {
        shards: config.runtime.shards,
        listen: config.listeners.binds(),
        backend: match config.runtime.backend {
            BackendChoice::Auto => ring_runtime::BackendChoice::Auto,
            BackendChoice::Uring => ring_runtime::BackendChoice::Uring,
            BackendChoice::Epoll => ring_runtime::BackendChoice::Epoll,
        },
        coalesce_below: config.runtime.coalesce_below,
        spare_send_queues: config.runtime.spare_send_queues,
        mailbox_batches: config.runtime.mailbox_batches,
        max_pending_posts: config.runtime.max_pending_posts,
        write_interval: config.runtime.write_interval,
        write_pacing: match config.runtime.write_pacing {
            WritePacingChoice::Adaptive => ring_runtime::WritePacing::Adaptive,
            WritePacingChoice::Fixed => ring_runtime::WritePacing::Fixed,
        },
        sched_slice: config.runtime.sched_slice,
        pin_threads: config.runtime.pin_threads,
        unpin_when_shared: config.runtime.unpin_when_shared,
        listen_backlog: config
            .runtime
            .listen_backlog
            .unwrap_or_else(ring_runtime::kernel_max_listen_backlog),
        accept_backoff: config.runtime.accept_backoff,
        recv_buffers: config.runtime.recv_buffers,
        recv_buffer_size: config.runtime.recv_buffer_size,
        input_fences: config.runtime.strict_subscribe_order,
        ..RuntimeConfig::default()
    };
    runtime.drain_timeout = config.connection.connect_timeout.min(runtime.drain_timeout);
    runtime
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{default_raw, parse_raw};

    fn config_with(overrides: &str) -> Config {
        let mut raw = default_raw().expect("embedded defaults parse");
        raw.overlay(parse_raw("test", overrides).expect("overrides parse"));
        raw.validate().expect("config validates")
    }

    #[test]
    fn listen_backlog_defaults_to_the_kernel_maximum() {
        let runtime = runtime_config(&config_with(""));
        assert_eq!(
            runtime.listen_backlog,
            ring_runtime::kernel_max_listen_backlog()
        );
        let runtime = runtime_config(&config_with("[runtime]\nlisten_backlog = 100\n"));
        assert_eq!(runtime.listen_backlog, 100);
    }

    #[test]
    fn receive_buffers_reach_the_runtime() {
        let defaults = runtime_config(&config_with(""));
        assert_eq!(
            (defaults.recv_buffers, defaults.recv_buffer_size),
            (
                RuntimeConfig::default().recv_buffers,
                RuntimeConfig::default().recv_buffer_size
            )
        );
        let set = "[runtime]\nrecv_buffers = 64\nrecv_buffer_size = 4096\n";
        let runtime = runtime_config(&config_with(set));
        assert_eq!((runtime.recv_buffers, runtime.recv_buffer_size), (64, 4096));
        runtime
            .validate()
            .expect("the runtime accepts what the config validated");
    }
}
