//! The raw configuration layer: TOML as written, every field optional so files can be overlaid.

use serde::{Deserialize, Serialize};

/// Declares a raw section struct whose fields are all optional, plus `overlay` (later wins).
macro_rules! raw_section {
    ($(#[$meta:meta])* $name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, Deserialize, Serialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $(#[serde(skip_serializing_if = "Option::is_none")] pub $field: Option<$ty>,)*
        }

        impl $name {
            /// Takes every field that `over` sets.
            pub fn overlay(&mut self, over: Self) {
                $(if over.$field.is_some() { self.$field = over.$field; })*
            }
        }
    };
}

raw_section!(
    /// `[listeners]`
    RawListeners {
        tcp: Vec<String>,
        tls: Vec<super::listeners::RawTlsListener>,
        ws: Vec<super::listeners::RawWsListener>,
        wss: Vec<super::listeners::RawWssListener>,
    }
);
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
    /// `[log]`
    RawLog {
        level: String,
        format: String,
        max_lifecycle_per_sec: u64,
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
    /// `[ip]`
    RawIp {
        allow: Vec<String>,
        deny: Vec<String>,
        max_connections: u64,
        max_connect_rate: u64,
        ban_after_auth_failures: u64,
        auth_failure_window: u64,
        ban_duration: u64,
        max_tracked: u64,
    }
);
raw_section!(
    /// `[http]`
    RawHttp {
        bind: String,
        token: String,
        username: String,
        password: String,
        tls_cert_file: String,
        tls_key_file: String,
        max_connections: u64,
        max_head_bytes: u64,
        max_body_bytes: u64,
        read_timeout_ms: u64,
    }
);
raw_section!(
    /// `[overload]`
    RawOverload {
        memory_high_bytes: u64,
        memory_low_bytes: u64,
    }
);
raw_section!(
    /// `[auth.http]`
    RawAuthHttp {
        login_url: String,
        acl_url: String,
        timeout_ms: u64,
        max_concurrent: u64,
    }
);
raw_section!(
    /// `[auth.redis]`
    RawAuthRedis {
        url: String,
        timeout_ms: u64,
        salt_encoding: String,
    }
);
raw_section!(
    /// `[auth.jwt]`
    RawAuthJwt {
        from: String,
        hs256_secret_file: String,
        rs256_public_key_file: String,
        es256_public_key_file: String,
        issuer: String,
        audience: String,
        username_claim: String,
        publish_claim: String,
        subscribe_claim: String,
        leeway_s: u64,
    }
);

/// `[auth]`, with its backends' tables (`[auth.http]`, `[auth.redis]`, `[auth.jwt]`), each
/// overlaid key by key.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuth {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_anonymous: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acl_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backends: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pending: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_entries: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_ttl: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<RawAuthHttp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<RawAuthRedis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt: Option<RawAuthJwt>,
}

impl RawAuth {
    /// Takes every field that `over` sets; backend tables are overlaid key by key.
    pub fn overlay(&mut self, over: Self) {
        set_if_some(&mut self.allow_anonymous, over.allow_anonymous);
        set_if_some(&mut self.password_file, over.password_file);
        set_if_some(&mut self.acl_file, over.acl_file);
        set_if_some(&mut self.backends, over.backends);
        set_if_some(&mut self.workers, over.workers);
        set_if_some(&mut self.max_pending, over.max_pending);
        set_if_some(&mut self.cache_entries, over.cache_entries);
        set_if_some(&mut self.cache_ttl, over.cache_ttl);
        overlay_table(&mut self.http, over.http, RawAuthHttp::overlay);
        overlay_table(&mut self.redis, over.redis, RawAuthRedis::overlay);
        overlay_table(&mut self.jwt, over.jwt, RawAuthJwt::overlay);
    }
}

fn set_if_some<T>(mine: &mut Option<T>, over: Option<T>) {
    if over.is_some() {
        *mine = over;
    }
}

/// Overlays an optional table: key by key when both have it.
fn overlay_table<T>(mine: &mut Option<T>, over: Option<T>, overlay: fn(&mut T, T)) {
    match (mine.as_mut(), over) {
        (Some(table), Some(over)) => overlay(table, over),
        (None, Some(over)) => *mine = Some(over),
        (_, None) => {}
    }
}
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

raw_section!(
    /// `[cluster]`: present only on a node of a cluster.
    RawCluster {
        node_id: String,
        nats: Vec<String>,
        max_outbound_messages: u64,
        subject_prefix: String,
        replicas: u64,
        node_timeout_ms: u64,
        replay_window_ms: u64,
        replay_max_bytes: u64,
        tls_ca_file: String,
        tls_cert_file: String,
        tls_key_file: String,
        creds_file: String,
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
    pub bridges: Option<Vec<super::bridges::RawBridge>>,
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
