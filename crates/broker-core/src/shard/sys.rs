//! `$SYS/broker/...`: shard 0 publishes the summed counters as retained messages on an interval.
//! Filters starting with a wildcard never match `$` topics, so `#` subscribers do not see them.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use codec::{MqttStr, PublishProperties, QoS};
use router::TopicName;

use super::parts::Figures;
use super::publish::PublishInput;
use super::timer_book::TimerPurpose;
use super::{BrokerShard, Ctx};
use crate::message::Message;
use crate::metrics::ShardCounters;
use crate::session::Sessions;
use router::RetainedStore;
use std::sync::Arc;

impl BrokerShard {
    /// Starts the `$SYS` (gauge) timer. Every shard refreshes its gauges on it; shard 0 also
    /// publishes the sums when `$SYS` is on.
    pub(super) fn start_sys(&mut self, ctx: &mut Ctx) {
        self.figures.refresh_queue_gauges(&self.sessions);
        self.figures.publish_slow_report(&self.sessions, ctx.now());
        if let Some(interval) = self.shared.config.gauge_interval() {
            self.timers
                .arm(ctx, ctx.now() + interval, TimerPurpose::Sys);
        }
    }

    /// Refreshes the costly gauges, publishes every `$SYS` topic once (shard 0, when `$SYS` is
    /// on) and re-arms the timer.
    pub(super) fn publish_sys(&mut self, ctx: &mut Ctx) {
        let Some(interval) = self.shared.config.gauge_interval() else {
            return;
        };
        self.timers
            .arm(ctx, ctx.now() + interval, TimerPurpose::Sys);
        self.figures.refresh_queue_gauges(&self.sessions);
        self.figures.publish_slow_report(&self.sessions, ctx.now());
        self.shared.links.traces.expire(ctx.now());
        if self.id.index() != 0 || self.shared.config.sys_interval.is_none() {
            return;
        }
        let snapshot = self.shared.metrics.snapshot();
        let uptime = self.shared.time.uptime().as_secs();
        let values: [(&str, String); 15] = [
            (
                "$SYS/broker/version",
                format!("ringmq {}", env!("CARGO_PKG_VERSION")),
            ),
            ("$SYS/broker/uptime", format!("{uptime} seconds")),
            (
                "$SYS/broker/clients/connected",
                snapshot.clients_connected.to_string(),
            ),
            (
                "$SYS/broker/clients/total",
                snapshot.clients_total.to_string(),
            ),
            (
                "$SYS/broker/messages/received",
                snapshot.messages_received.to_string(),
            ),
            (
                "$SYS/broker/messages/sent",
                snapshot.messages_sent.to_string(),
            ),
            (
                "$SYS/broker/messages/dropped",
                snapshot.messages_dropped.to_string(),
            ),
            (
                "$SYS/broker/bytes/received",
                snapshot.bytes_received.to_string(),
            ),
            ("$SYS/broker/bytes/sent", snapshot.bytes_sent.to_string()),
            (
                "$SYS/broker/subscriptions/count",
                snapshot.subscriptions.to_string(),
            ),
            (
                "$SYS/broker/retained messages/count",
                snapshot.retained_messages.to_string(),
            ),
            (
                "$SYS/broker/connections/open",
                self.shared
                    .door
                    .connections
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "$SYS/broker/connections/partial_frame_closed",
                snapshot.partial_frame_closed.to_string(),
            ),
            (
                "$SYS/broker/clients/throttled",
                snapshot.publishers_throttled.to_string(),
            ),
            (
                "$SYS/broker/connections/refused_overload",
                snapshot.refused_overload.to_string(),
            ),
        ];
        let broker = MqttStr::default();
        for (name, value) in values {
            self.publish_sys_value(ctx, name, value, &broker);
        }
        if let Some(gatekeeper) = &self.shared.access.gatekeeper {
            let figures = gatekeeper.figures();
            let auth: [(&str, usize); 4] = [
                ("$SYS/broker/auth/pending", figures.pending),
                ("$SYS/broker/auth/cached_logins", figures.cached_logins),
                ("$SYS/broker/auth/cached_topics", figures.cached_topics),
                (
                    "$SYS/broker/auth/backend_failures",
                    figures.backend_failures,
                ),
            ];
            for (name, value) in auth {
                self.publish_sys_value(ctx, name, value.to_string(), &broker);
            }
        }
        for bridge in self.shared.links.bridges.stats() {
            let figures = [
                ("connected", u64::from(bridge.connected)),
                ("messages/in", bridge.messages_in),
                ("messages/out", bridge.messages_out),
                ("dropped", bridge.dropped),
                ("reconnects", bridge.reconnects),
            ];
            for (leaf, value) in figures {
                let name = format!("$SYS/broker/bridges/{}/{leaf}", bridge.name);
                self.publish_sys_value(ctx, &name, value.to_string(), &broker);
            }
        }
        self.publish_cluster_sys(ctx, &broker);
    }

    /// `$SYS/broker/cluster/...`: this node's cluster link figures (nothing on a single node).
    fn publish_cluster_sys(&mut self, ctx: &mut Ctx, broker: &MqttStr) {
        let Some(link) = &self.shared.links.cluster else {
            return;
        };
        let f = link.figures();
        let figures = [
            ("connected", f.connected),
            ("messages/out", f.messages_out),
            ("messages/in", f.messages_in),
            ("dropped/queue_full", f.dropped_queue_full),
            ("dropped/disconnected", f.dropped_disconnected),
            ("dropped/inbound", f.dropped_inbound),
            ("dropped/slow_consumer", f.slow_consumer),
            ("nats/disconnects", f.nats_disconnects),
            ("replay/replays", f.replays),
            ("replay/messages", f.replayed),
            ("reliable/stored", f.reliable_stored),
            ("reliable/failures", f.reliable_failures),
            ("reliable/retries", f.reliable_retries),
            ("acks/refused", f.acks_refused),
            ("subscriptions", f.subscriptions),
            ("retained/out", f.retained_out),
            ("retained/retries", f.retained_retries),
            ("retained/written_back", f.retained_written_back),
            ("retained/in", f.retained_in),
            ("retained/failures", f.retained_failures),
            ("sessions/ready", f.ownership_ready),
            ("sessions/taken_over", f.sessions_taken_over),
            ("sessions/released", f.sessions_released),
            ("sessions/lost", f.sessions_lost),
            ("sessions/unchecked", f.ownership_unchecked),
            ("sessions/refused_unchecked", f.ownership_refused),
            ("sessions/recovered", f.sessions_recovered),
            ("sessions/replayed", f.sessions_replayed),
            ("sessions/replay_failures", f.sessions_replay_failures),
            ("restart/replayed", f.restart_replayed),
            ("restart/replay_failures", f.restart_replay_failures),
            ("recovered/dropped", f.recovered_dropped),
            ("mirror/writes", f.mirror_writes),
            ("mirror/failures", f.mirror_failures),
            ("journal/writes", f.journal_writes),
            ("journal/failures", f.journal_failures),
            ("total/nodes", f.total_nodes),
            ("total/clients", f.total_clients),
            ("total/sessions", f.total_sessions),
            ("total/subscriptions", f.total_subscriptions),
            ("total/messages/received", f.total_received),
            ("total/messages/sent", f.total_sent),
        ];
        for (leaf, value) in figures {
            let name = format!("$SYS/broker/cluster/{leaf}");
            self.publish_sys_value(ctx, &name, value.to_string(), broker);
        }
    }

    fn publish_sys_value(&mut self, ctx: &mut Ctx, name: &str, value: String, broker: &MqttStr) {
        let limits = router::TopicLimits::default();
        let (Ok(topic), Ok(topic_text)) = (TopicName::new(name, &limits), MqttStr::try_from(name))
        else {
            return;
        };
        self.publish_internal(
            ctx,
            PublishInput {
                topic,
                topic_text,
                payload: Bytes::from(value),
                qos: QoS::AtMostOnce,
                retain: true,
                properties: PublishProperties::default(),
                expiry: None,
                publisher: None,
                client_id: broker,
                to_cluster: false,
            },
        );
    }
}

impl Figures {
    /// This shard's gauges for `$SYS`: O(1), refreshed every turn.
    pub(super) fn update_gauges(
        &self,
        sessions: &Sessions,
        retained: &RetainedStore<Arc<Message>>,
    ) {
        let counters = self.counters();
        ShardCounters::set(
            &counters.clients_connected,
            self.gauges.connected_clients as u64,
        );
        ShardCounters::set(&counters.clients_total, sessions.len() as u64);
        ShardCounters::set(&counters.subscriptions, self.gauges.subscriptions as u64);
        if self.index == 0 {
            ShardCounters::set(&counters.retained_messages, retained.len() as u64);
            ShardCounters::set(&counters.retained_bytes, retained.total_bytes() as u64);
        }
    }
}
