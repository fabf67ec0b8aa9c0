//! Which configuration keys a reload can put in force and which only a restart can, each
//! with how to tell whether two configurations agree on it.

use crate::config::Config;

/// A config key and whether two configurations agree on it.
pub(crate) type KeyCheck = (&'static str, fn(&Config, &Config) -> bool);

/// `same!("key", field.path)`: the key and a comparison of that typed field.
macro_rules! same {
    ($key:literal, $($field:ident).+) => {
        ($key, |a: &Config, b: &Config| a.$($field).+ == b.$($field).+)
    };
}

/// Keys a reload applies at once (`log.level` is applied apart: it may fail).
pub(crate) const LIVE: &[KeyCheck] = &[
    same!("ip.allow", ip.allow),
    same!("ip.deny", ip.deny),
    same!("ip.exempt", ip.exempt),
    same!("ip.max_connections", ip.max_connections),
    same!("ip.max_connect_rate", ip.max_connect_rate),
    same!("ip.ban_after_auth_failures", ip.ban_after_auth_failures),
    same!(
        "ip.ban_user_after_auth_failures",
        ip.ban_user_after_auth_failures
    ),
    same!("ip.auth_failure_window", ip.auth_failure_window),
    same!("ip.ban_duration", ip.ban_duration),
    same!("ip.max_tracked", ip.max_tracked),
    same!("limits.max_publish_rate", publish_rates.messages),
    same!("limits.max_publish_bytes_rate", publish_rates.bytes),
    same!("overload.memory_high_bytes", overload.memory_high),
    same!("overload.memory_low_bytes", overload.memory_low),
    same!("log.max_lifecycle_per_sec", log.max_lifecycle_per_sec),
];

/// Keys read once at start: a new value takes effect at the next start.
pub(crate) const RESTART: &[KeyCheck] = &[
    same!("listeners.tcp", listeners.tcp),
    same!("listeners.proxy_tcp", listeners.proxy_tcp),
    same!("listeners.proxy_trusted", listeners.proxy_trusted),
    same!(
        "listeners.tls, listeners.ws, listeners.wss",
        listeners.transports
    ),
    same!("runtime.shards", runtime.shards),
    same!("runtime.backend", runtime.backend),
    same!("runtime.max_pending_changes", runtime.max_pending_changes),
    same!("runtime.mailbox_batches", runtime.mailbox_batches),
    same!("runtime.max_pending_posts", runtime.max_pending_posts),
    same!("runtime.write_interval_us", runtime.write_interval),
    same!("runtime.write_pacing", runtime.write_pacing),
    same!("runtime.sched_slice_us", runtime.sched_slice),
    same!("runtime.pin_threads", runtime.pin_threads),
    same!("runtime.unpin_when_shared", runtime.unpin_when_shared),
    same!("runtime.coalesce_below", runtime.coalesce_below),
    same!("runtime.spare_send_queues", runtime.spare_send_queues),
    same!("runtime.listen_backlog", runtime.listen_backlog),
    same!("runtime.accept_backoff_ms", runtime.accept_backoff),
    same!("runtime.recv_buffers", runtime.recv_buffers),
    same!("runtime.recv_buffer_size", runtime.recv_buffer_size),
    same!("runtime.subscribe_order", runtime.strict_subscribe_order),
    same!(
        "runtime.subscribe_order_keep_bytes",
        runtime.subscribe_order_keep_bytes
    ),
    same!("log.format", log.format),
    same!("connection.max_connections", connection.max_connections),
    same!("connection.connect_timeout", connection.connect_timeout),
    same!("connection.max_keep_alive", connection.max_keep_alive),
    same!(
        "connection.default_keep_alive",
        connection.default_keep_alive
    ),
    same!("connection.max_client_id_len", connection.max_client_id_len),
    same!("limits.max_packet_size", limits.max_packet_size),
    same!("limits.receive_maximum", limits.receive_maximum),
    same!("limits.max_inflight_outbound", limits.max_inflight_outbound),
    same!("limits.topic_alias_maximum", limits.topic_alias_maximum),
    same!(
        "limits.outbound_topic_alias_maximum",
        limits.outbound_topic_alias_maximum
    ),
    same!("limits.max_topic_length", limits.max_topic_length),
    same!("limits.max_topic_levels", limits.max_topic_levels),
    same!(
        "limits.max_subscriptions_per_client",
        limits.max_subscriptions_per_client
    ),
    same!("limits.max_connect_size", limits.max_connect_size),
    same!(
        "limits.max_partial_frame_bytes",
        limits.max_partial_frame_bytes
    ),
    same!(
        "limits.return_memory_after_bytes",
        limits.return_memory_after_bytes
    ),
    same!("limits.free_memory_hold_ms", limits.free_memory_hold),
    same!("routing.shared_strategy", routing.shared_strategy),
    same!(
        "routing.exclusive_subscriptions",
        routing.exclusive_subscriptions
    ),
    same!("rewrite", routing.rewrite),
    same!("auto_subscribe", routing.auto_subscribe),
    same!("webhooks", webhooks),
    same!("queues.outbound_bytes", queues.outbound_bytes),
    same!("queues.backlog_retry_ms", queues.backlog_retry),
    same!("queues.max_queued_messages", queues.max_queued_messages),
    same!("queues.max_queued_bytes", queues.max_queued_bytes),
    same!(
        "queues.max_total_queued_bytes",
        queues.max_total_queued_bytes
    ),
    same!(
        "queues.max_total_outbound_bytes",
        queues.max_total_outbound_bytes
    ),
    same!("queues.slow_consumer_policy", queues.slow_consumer_policy),
    same!("sessions.max_session_expiry", sessions.max_session_expiry),
    same!("sessions.max_sessions", sessions.max_sessions),
    same!("retained.max_messages", retained.max_messages),
    same!("retained.max_bytes", retained.max_bytes),
    same!("retained.delivery_per_turn", retained.delivery_per_turn),
    same!("delayed.enabled", delayed.enabled),
    same!("delayed.max_messages", delayed.max_messages),
    same!("delayed.max_delay_seconds", delayed.max_delay_seconds),
    same!("traces.max_traces", traces.max_traces),
    same!("traces.max_bytes", traces.max_bytes),
    same!("traces.max_seconds", traces.max_duration),
    same!("slow_subscribers.threshold_ms", slow_subscribers.threshold),
    same!("slow_subscribers.top", slow_subscribers.top),
    same!("slow_subscribers.expire_seconds", slow_subscribers.expire),
    same!("sys.interval", sys_interval),
    same!("persistence.engine", persistence.engine),
    same!("persistence.dir", persistence.dir),
    same!("persistence.sync", persistence.sync),
    same!("persistence.sync_interval_ms", persistence.sync_interval),
    same!(
        "persistence.memory_queue_messages",
        persistence.memory_queue_messages
    ),
    same!("persistence.cache_mb", persistence.cache_bytes),
    same!("persistence.log_mb", persistence.log_bytes),
    same!("persistence.log_max_mb", persistence.log_max_bytes),
    same!("auth.allow_anonymous", auth.allow_anonymous),
    same!("auth.password_file", auth.password_file),
    same!("auth.acl_file", auth.acl_file),
    same!("auth.backends", auth.backends),
    same!("auth.client_id_owner_check", auth.client_id_owner_check),
    same!(
        "auth.use_username_as_clientid",
        auth.use_username_as_clientid
    ),
    same!("auth.workers", auth.gatekeeper.workers),
    same!("auth.max_pending", auth.gatekeeper.max_pending),
    same!("auth.cache_entries", auth.gatekeeper.cache_entries),
    same!("auth.cache_ttl", auth.gatekeeper.cache_ttl),
    same!("auth.http", auth.http),
    same!("auth.redis", auth.redis),
    same!("auth.jwt", auth.jwt),
    same!("auth.scram", auth.scram),
    same!("http.bind", http.bind),
    same!("http.token", http.token),
    same!("http.username, http.password", http.basic),
    same!("http.tls_cert_file, http.tls_key_file", http.tls),
    same!("http.max_connections", http.max_connections),
    same!("http.max_head_bytes", http.max_head_bytes),
    same!("http.max_body_bytes", http.max_body_bytes),
    same!("http.read_timeout_ms", http.read_timeout),
    same!("http.header_timeout_ms", http.header_timeout),
    same!("http.allowed_hosts", http.allowed_hosts),
    same!("http.history_interval_ms", http.history_interval),
    same!(
        "cluster.node_id, cluster.nats, cluster.max_outbound_messages, cluster.subject_prefix, \
         cluster.replicas, cluster.node_timeout_ms, cluster.replay_window_ms, \
         cluster.replay_max_bytes, cluster.ack_timeout_ms, cluster.ack_while_disconnected, \
         cluster.admit_unchecked_sessions, cluster.qos2_journal, cluster.qos2_journal_wait_ms, \
         cluster.tls_ca_file, cluster.tls_cert_file, cluster.tls_key_file, cluster.creds_file",
        cluster
    ),
];

/// The keys of `checks` on which `a` and `b` differ, in table order.
pub(crate) fn changed(checks: &[KeyCheck], a: &Config, b: &Config) -> Vec<&'static str> {
    checks
        .iter()
        .filter(|(_, same)| !same(a, b))
        .map(|(key, _)| *key)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::default_raw;

    /// A key nobody classified would be silently ignored by a reload: every key of the
    /// embedded defaults is live, restart-only or `log.level`.
    #[test]
    fn every_key_of_the_defaults_is_classified() {
        let raw = toml::Value::try_from(default_raw().unwrap()).unwrap();
        let classified = |name: &str| {
            name == "log.level"
                || LIVE
                    .iter()
                    .chain(RESTART)
                    .any(|(keys, _)| keys.split(", ").any(|key| key == name))
        };
        let mut raw = raw;
        // `[cluster]` is absent from the defaults: classify its keys too.
        let cluster = "node_id = \"n1\"\nnats = [\"nats://a:1\"]\n\
                       max_outbound_messages = 1\nsubject_prefix = \"r\"\nreplicas = 1\nnode_timeout_ms = 1000\n\
                       replay_window_ms = 1000\nreplay_max_bytes = 1048576\nack_timeout_ms = 1000\n\
                       tls_ca_file = \"a\"\ntls_cert_file = \"b\"\ntls_key_file = \"c\"\n\
                       creds_file = \"d\"\n";
        raw.as_table_mut()
            .unwrap()
            .insert("cluster".into(), toml::from_str(cluster).unwrap());
        for (section, table) in raw.as_table().unwrap() {
            for key in table.as_table().unwrap().keys() {
                let name = format!("{section}.{key}");
                assert!(classified(&name), "{name}: add it to LIVE or RESTART");
            }
        }
    }
}
