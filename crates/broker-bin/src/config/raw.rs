//! The raw configuration layer: TOML as written, every field optional so files can be overlaid.

use serde::{Deserialize, Serialize};

use super::abuse::RawOverload;
use super::auth::RawAuth;
use super::bridges::RawBridge;
use super::cluster::RawCluster;
use super::http::RawHttp;
use super::ip::RawIp;
use super::listeners::RawListeners;
use super::log::RawLog;
use super::overlay::{overlay_table, raw_section, set_if_some};

raw_section!(
    /// `[runtime]`
    RawRuntime {
        shards: usize,
        backend: String,
        max_pending_changes: u64,
        mailbox_batches: u64,
        max_pending_posts: u64,
        write_interval_us: u64,
        write_pacing: String,
        sched_slice_us: u64,
        pin_threads: bool,
        coalesce_below: u64,
        spare_send_queues: u64,
        listen_backlog: u64,
        accept_backoff_ms: u64,
        recv_buffers: u64,
        recv_buffer_size: u64,
    }
);
raw_section!(
    /// `[connection]`
    RawConnection {
        max_connections: u64,
        connect_timeout: u64,
        max_keep_alive: u64,
        default_keep_alive: u64,
        max_client_id_len: u64,
    }
);
raw_section!(
    /// `[limits]`
    RawLimits {
        max_packet_size: u64,
        receive_maximum: u64,
        max_inflight_outbound: u64,
        topic_alias_maximum: u64,
        outbound_topic_alias_maximum: u64,
        max_topic_length: u64,
        max_topic_levels: u64,
        max_subscriptions_per_client: u64,
        max_connect_size: u64,
        max_partial_frame_bytes: u64,
        return_memory_after_bytes: u64,
        free_memory_hold_ms: u64,
        max_publish_rate: u64,
        max_publish_bytes_rate: u64,
    }
);
raw_section!(
    /// `[routing]`
    RawRouting { shared_strategy: String }
);
raw_section!(
    /// `[queues]`
    RawQueues {
        outbound_bytes: u64,
        backlog_retry_ms: u64,
        max_queued_messages: u64,
        max_queued_bytes: u64,
        max_total_queued_bytes: u64,
        slow_consumer_policy: String,
    }
);
raw_section!(
    /// `[sessions]`
    RawSessions { max_session_expiry: u64, max_sessions: u64 }
);
raw_section!(
    /// `[retained]`
    RawRetained { max_messages: u64, max_bytes: u64 }
);
raw_section!(
    /// `[sys]`
    RawSys { interval: u64 }
);

raw_section!(
    /// `[persistence]`
    RawPersistence {
        engine: String,
        dir: String,
        sync: String,
        sync_interval_ms: u64,
        memory_queue_messages: u64,
        cache_mb: u64,
        log_mb: u64,
        log_max_mb: u64,
    }
);

/// The whole raw configuration file.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub listeners: RawListeners,
    #[serde(default)]
    pub runtime: RawRuntime,
    #[serde(default)]
    pub log: RawLog,
    #[serde(default)]
    pub connection: RawConnection,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub routing: RawRouting,
    #[serde(default)]
    pub queues: RawQueues,
    #[serde(default)]
    pub sessions: RawSessions,
    #[serde(default)]
    pub retained: RawRetained,
    #[serde(default)]
    pub sys: RawSys,
    #[serde(default)]
    pub persistence: RawPersistence,
    #[serde(default)]
    pub auth: RawAuth,
    #[serde(default)]
    pub ip: RawIp,
    #[serde(default)]
    pub overload: RawOverload,
    /// `[[bridges]]`: a later file's list replaces the earlier one whole.
    #[serde(default)]
    pub bridges: Option<Vec<RawBridge>>,
    #[serde(default)]
    pub http: RawHttp,
    /// `[cluster]`: absent on a single node (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<RawCluster>,
}

impl RawConfig {
    /// Takes every field that `over` sets, section by section.
    pub fn overlay(&mut self, over: RawConfig) {
        self.listeners.overlay(over.listeners);
        self.runtime.overlay(over.runtime);
        self.log.overlay(over.log);
        self.connection.overlay(over.connection);
        self.limits.overlay(over.limits);
        self.routing.overlay(over.routing);
        self.queues.overlay(over.queues);
        self.sessions.overlay(over.sessions);
        self.retained.overlay(over.retained);
        self.sys.overlay(over.sys);
        self.persistence.overlay(over.persistence);
        self.auth.overlay(over.auth);
        self.ip.overlay(over.ip);
        self.overload.overlay(over.overload);
        set_if_some(&mut self.bridges, over.bridges);
        self.http.overlay(over.http);
        overlay_table(&mut self.cluster, over.cluster, RawCluster::overlay);
    }
}
