//! Delayed publish on the shard (`crate::delayed`): the shard that received a
//! `$delayed/{seconds}/{topic}` PUBLISH keeps the message in its `DelayedBook`
//! (`delayed_book.rs`), with one timer each, stores it with `[persistence]`, and publishes it to
//! `{topic}` as the broker when the timer fires, through `publish_message` (retained, the
//! cluster hand-off, routing). The admin API lists and cancels them here; recovered ones are
//! armed once the shard runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use codec::{MqttStr, ProtocolVersion, Publish, QoS, ReasonCode, SharedPublish};
use ring_runtime::ConnId;
use router::TopicName;
use session_store::storage::{SessionWrite, StoredDelayed};
use tracing::debug;

use super::delayed_book::Pending;
use super::publish::{Origin, post_published};
use super::timer_book::TimerPurpose;
use super::{BrokerShard, Ctx, Fault};
use crate::detach;
use crate::message::Message;
use crate::metrics::{DropReason, ShardCounters};
use crate::store::{
    instant_to_system, message_from_stored, stored_delayed_message, system_to_instant,
};

impl BrokerShard {
    /// `topic` itself, or, when it is a `$delayed/{seconds}/{target}` topic and delayed
    /// publish is on, the target (the PUBLISH then carries it) and the delay. A malformed
    /// `$delayed/` topic is an invalid topic name.
    pub(super) fn delayed_target(
        &self,
        publish: &mut Publish,
        topic: TopicName,
    ) -> Result<(TopicName, Option<Duration>), Fault> {
        // Nearly every PUBLISH: not a `$` topic, so not `$delayed/` (one byte looked at).
        if topic.as_str().as_bytes().first() != Some(&b'$') {
            return Ok((topic, None));
        }
        let invalid = |detail: String| Fault::new(ReasonCode::TopicNameInvalid, detail);
        let Some(parsed) = (self.shared.topic_rules.delayed.parse(topic.as_str()))
            .map_err(|e| invalid(e.to_string()))?
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

    /// Keeps an accepted PUBLISH for `delay` (stored with this turn's writes); the reason code
    /// to acknowledge it with (0x97 at `delayed.max_messages`).
    fn delay_publish(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        delay: Duration,
        publish: Publish,
    ) -> ReasonCode {
        if !self.shared.topic_rules.delayed.try_reserve() {
            ShardCounters::add(&self.figures.counters().delayed_refused, 1);
            debug!(
                client = client_id.as_str(),
                "delayed publish refused: delayed.max_messages"
            );
            return ReasonCode::QuotaExceeded;
        }
        let (flags, expiry) = (
            (publish.qos, publish.retain),
            publish.properties.message_expiry_interval,
        );
        let (topic, payload) = publish.content.into_parts();
        let topic = detach::string(&topic);
        let Ok(shared) = SharedPublish::new(topic, detach::bytes(&payload), &publish.properties)
        else {
            self.shared.topic_rules.delayed.release();
            return ReasonCode::ImplementationSpecificError;
        };
        // Its key is drawn when it is published (`delayed_due`).
        let message = self.figures.message(ctx, shared, flags, expiry, 0);
        let now = ctx.now();
        let (id, due) = (self.shared.topic_rules.delayed.next_id(), now + delay);
        self.durable.record(SessionWrite::DelayedSet {
            id,
            delayed: Box::new(StoredDelayed {
                due: instant_to_system(due, now),
                publisher: client_id.clone(),
                message: stored_delayed_message(&message, now),
            }),
        });
        self.keep_delayed(ctx, id, message, client_id.clone(), due);
        ReasonCode::Success
    }

    /// Puts a delayed message (its place under the bound taken) in the book with its timer.
    fn keep_delayed(
        &mut self,
        ctx: &mut Ctx,
        id: u64,
        message: Arc<Message>,
        publisher: MqttStr,
        due: Instant,
    ) {
        ShardCounters::add(&self.figures.counters().delayed_pending, 1);
        let timer = self.timers.arm(ctx, due, TimerPurpose::Delayed(id));
        let pending = Pending {
            message,
            publisher,
            due,
            timer,
        };
        self.delivery.delayed.pending.insert(id, pending);
    }

    /// Once running: arms the delayed messages recovered from the store (those whose time
    /// passed while the broker was down fire at once).
    pub(super) fn resume_delayed(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        for (id, stored) in std::mem::take(&mut self.delivery.delayed.recovered) {
            let due = system_to_instant(stored.due, now);
            match message_from_stored(&stored.message, now) {
                Some(message) => self.keep_delayed(ctx, id, message, stored.publisher, due),
                None => {
                    // Unreadable now (a stricter topic limit since): cleared, not kept.
                    self.shared.topic_rules.delayed.release();
                    self.durable.record(SessionWrite::DelayedCleared { id });
                }
            }
        }
    }

    /// A delayed message's timer fired: it is published as a new message from the broker
    /// (dropped when its Message Expiry Interval ran out while it waited); the event hook gets
    /// its `message.published` now, naming the client that published it.
    pub(super) fn delayed_due(&mut self, ctx: &mut Ctx, id: u64) {
        let Some(pending) = self.take_delayed(id) else {
            return;
        };
        let kept = pending.message;
        if kept.expires_at.is_some_and(|at| at <= ctx.now()) {
            self.figures.count_dropped(DropReason::Expired, 1);
            return;
        }
        let limits = &self.shared.limits.topics;
        let Ok(topic) = TopicName::from_mqtt_str(kept.publish.topic().clone(), limits) else {
            return;
        };
        let message = Arc::new(Message {
            publish: kept.publish.clone(),
            qos: kept.qos,
            retain: kept.retain,
            expires_at: kept.expires_at,
            received_ns: self.figures.turn_nanos(ctx),
            key: self.cluster_side.message_keys.next(&self.shared.links),
        });
        ShardCounters::add(&self.figures.counters().delayed_published, 1);
        let (topic_text, payload) = (message.publish.topic(), message.publish.payload());
        let flags = (message.qos, message.retain);
        post_published(
            &self.shared.links,
            &pending.publisher,
            topic_text,
            flags,
            payload,
        );
        let origin = Origin {
            // Published by the broker: no connection of the publisher to exclude.
            publisher: None,
            client_id: &pending.publisher,
            to_cluster: true,
        };
        self.publish_message(ctx, &topic, &message, origin);
    }

    /// Cancels pending message `id` (the admin API); whether this shard held it.
    pub(super) fn cancel_delayed(&mut self, ctx: &mut Ctx, id: u64) -> bool {
        let Some(pending) = self.take_delayed(id) else {
            return false;
        };
        self.timers.disarm(ctx, Some(pending.timer));
        true
    }

    /// Removes pending message `id` from the book and the store, giving back its place under
    /// the bound.
    fn take_delayed(&mut self, id: u64) -> Option<Pending> {
        let pending = self.delivery.delayed.pending.remove(&id)?;
        self.shared.topic_rules.delayed.release();
        self.durable.record(SessionWrite::DelayedCleared { id });
        ShardCounters::sub(&self.figures.counters().delayed_pending, 1);
        Some(pending)
    }
}
