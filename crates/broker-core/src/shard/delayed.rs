//! Delayed publish on the shard (`crate::delayed`): the shard that received a
//! `$delayed/{seconds}/{topic}` PUBLISH keeps the message in its `DelayedBook`, with one timer
//! each, and publishes it to `{topic}` as the broker when the timer fires, through
//! `publish_internal` (routing, retained, the cluster hand-off). The admin API lists and
//! cancels them here.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use codec::{MqttStr, ProtocolVersion, Publish, QoS, ReasonCode};
use ring_runtime::ConnId;
use router::TopicName;
use tracing::debug;

use super::delayed_book::{DelayedMessage, Pending};
use super::publish::PublishInput;
use super::timer_book::TimerPurpose;
use super::{BrokerShard, Ctx, Fault};
use crate::admin_query::DelayedInfo;
use crate::detach;
use crate::metrics::{DropReason, ShardCounters};
use session_store::storage::SessionWrite;

impl BrokerShard {
    /// `topic` itself, or, when it is a `$delayed/{seconds}/{target}` topic and delayed
    /// publish is on, the target (the PUBLISH then carries it) and the delay. A malformed
    /// `$delayed/` topic is an invalid topic name.
    pub(super) fn delayed_target(
        &self,
        publish: &mut Publish,
        topic: TopicName,
    ) -> Result<(TopicName, Option<Duration>), Fault> {
        let invalid = |detail: String| Fault::new(ReasonCode::TopicNameInvalid, detail);
        let Some(parsed) =
            (self.shared.delayed.parse(topic.as_str())).map_err(|e| invalid(e.to_string()))?
        else {
            return Ok((topic, None));
        };
        let target = TopicName::new(parsed.target, &self.shared.limits.topics)
            .map_err(|e| invalid(e.to_string()))?;
        let text =
            MqttStr::try_from(parsed.target.to_owned()).map_err(|e| invalid(e.to_string()))?;
        publish.content.set_topic(text);
        Ok((target, Some(parsed.delay)))
    }

    /// Forwards an accepted PUBLISH to `topic`, or keeps it when it carries a delay; the reason
    /// code to acknowledge it with.
    pub(super) fn accept_or_delay(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        client_id: &MqttStr,
        (topic, delay): (TopicName, Option<Duration>),
        publish: Publish,
    ) -> ReasonCode {
        let Some(delay) = delay else {
            return self.accept_publish(ctx, client_id, topic, publish);
        };
        let told = publish.qos != QoS::AtMostOnce
            && (self.conns.get(&conn)).is_some_and(|c| c.protocol == ProtocolVersion::V5);
        let reason = self.delay_publish(ctx, client_id, delay, publish);
        if reason == ReasonCode::QuotaExceeded && !told {
            self.figures.count_dropped(DropReason::DelayedFull, 1);
        }
        reason
    }

    /// A QoS 2 PUBLISH refused at the bound ends its exchange with the PUBREC: its id is no
    /// longer awaiting a PUBREL.
    pub(super) fn forget_refused_qos2(&mut self, client_id: &MqttStr, id: codec::PacketId) {
        let Some(session) = self.sessions.get_mut(client_id) else {
            return;
        };
        if session.release_awaiting(id) {
            let expiry = session.expiry;
            self.durable
                .record_if(expiry, || SessionWrite::Qos2Released {
                    client_id: client_id.clone(),
                    packet_id: id,
                });
        }
    }

    /// Keeps an accepted PUBLISH for `delay`; the reason code to acknowledge it with (0x97 at
    /// `delayed.max_messages`).
    fn delay_publish(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        delay: Duration,
        publish: Publish,
    ) -> ReasonCode {
        let counters = self.figures.counters();
        if !self.shared.delayed.try_reserve() {
            ShardCounters::add(&counters.delayed_refused, 1);
            debug!(
                client = client_id.as_str(),
                "delayed publish refused: delayed.max_messages"
            );
            return ReasonCode::QuotaExceeded;
        }
        ShardCounters::add(&counters.delayed_pending, 1);
        let id = self.shared.delayed.next_id(self.id);
        let (topic, payload) = publish.content.into_parts();
        let message = DelayedMessage {
            topic: detach::string(&topic),
            payload: detach::bytes(&payload),
            qos: publish.qos,
            retain: publish.retain,
            properties: publish.properties.into_inner(),
            publisher: detach::string(client_id),
            due_unix_ms: unix_ms(SystemTime::now() + delay),
        };
        let received = ctx.now();
        let timer = self
            .timers
            .arm(ctx, received + delay, TimerPurpose::Delayed(id));
        let pending = Pending {
            message,
            received,
            timer,
        };
        self.delayed.pending.insert(id, pending);
        ReasonCode::Success
    }

    /// A delayed message's timer fired: it is published (dropped when its Message Expiry
    /// Interval ran out while it waited).
    pub(super) fn delayed_due(&mut self, ctx: &mut Ctx, id: u64) {
        let Some(pending) = self.take_delayed(id) else {
            return;
        };
        let waited = ctx.now().saturating_duration_since(pending.received);
        let mut message = pending.message;
        let Some(expiry) = remaining_expiry(message.properties.message_expiry_interval, waited)
        else {
            self.figures.count_dropped(DropReason::Expired, 1);
            return;
        };
        message.properties.message_expiry_interval = expiry;
        let Ok(topic) = TopicName::new(message.topic.as_str(), &self.shared.limits.topics) else {
            return;
        };
        ShardCounters::add(&self.figures.counters().delayed_published, 1);
        self.publish_internal(
            ctx,
            PublishInput {
                topic,
                topic_text: message.topic,
                payload: message.payload,
                qos: message.qos,
                retain: message.retain,
                expiry,
                properties: message.properties,
                // Published by the broker: no connection of the publisher to exclude.
                publisher: None,
                client_id: &message.publisher,
                to_cluster: true,
            },
        );
    }

    /// Cancels pending message `id` (the admin API); whether this shard held it.
    pub(super) fn cancel_delayed(&mut self, ctx: &mut Ctx, id: u64) -> bool {
        let Some(pending) = self.take_delayed(id) else {
            return false;
        };
        self.timers.disarm(ctx, Some(pending.timer));
        true
    }

    /// This shard's pending messages after `after`, at most `limit` (the admin API).
    pub(super) fn delayed_page(&self, after: Option<u64>, limit: usize) -> Vec<DelayedInfo> {
        self.delayed.page(after, limit)
    }

    /// Removes pending message `id`, giving back its place under the bound.
    fn take_delayed(&mut self, id: u64) -> Option<Pending> {
        let pending = self.delayed.pending.remove(&id)?;
        self.shared.delayed.release();
        ShardCounters::sub(&self.figures.counters().delayed_pending, 1);
        Some(pending)
    }
}

/// What is left of a Message Expiry Interval (seconds) after `waited`: `Some(None)` without
/// one, `None` when it ran out.
fn remaining_expiry(expiry: Option<u32>, waited: Duration) -> Option<Option<u32>> {
    let Some(seconds) = expiry else {
        return Some(None);
    };
    let waited = u32::try_from(waited.as_secs()).unwrap_or(u32::MAX);
    match seconds.checked_sub(waited) {
        Some(left) if left > 0 => Some(Some(left)),
        _ => None,
    }
}

fn unix_ms(at: SystemTime) -> u64 {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::remaining_expiry;
    use std::time::Duration;

    #[test]
    fn the_expiry_interval_shrinks_by_the_wait_and_runs_out() {
        let secs = Duration::from_secs;
        assert_eq!(remaining_expiry(None, secs(100)), Some(None));
        assert_eq!(remaining_expiry(Some(60), secs(15)), Some(Some(45)));
        assert_eq!(
            remaining_expiry(Some(60), Duration::from_millis(15_900)),
            Some(Some(45)),
            "whole seconds waited"
        );
        assert_eq!(remaining_expiry(Some(60), secs(60)), None);
        assert_eq!(remaining_expiry(Some(10), secs(61)), None);
    }
}
