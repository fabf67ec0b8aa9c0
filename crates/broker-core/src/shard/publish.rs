//! Inbound PUBLISH: QoS flows, retained messages, and routing to every matching session,
//! grouped by the shard that owns it (one batch per destination shard per turn).

use std::mem;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use codec::{
    AppProperties, MqttStr, Packet, PubAck, PubRec, Publish, PublishProperties, QoS, ReasonCode,
    SharedPublish, Will,
};
use ring_runtime::ConnId;
use router::{Publisher, SubscriberId, TopicName};
use session_store::InboundQos2;
use tracing::{debug, warn};

use super::cluster::RouteScope;
use super::durability::Durability;
use super::order_kept::KeptMessage;
use super::parts::{AuthWaits, Delivery, Figures};
use super::will_check::WillJudge;
use super::{BrokerShard, Ctx, Fault, client_id_of};
use crate::detach;
use crate::message::{BareCopy, CopyView, Message, Recipient, ShardMsg};
use crate::metrics::ShardCounters;
use crate::shared::Shared;
use crate::shared_parts::AccessControl;
use ring_runtime::ShardId;
use session_store::storage::SessionWrite;

/// Topics only the broker publishes: a client's PUBLISH to one is refused (0x87 on MQTT 5.0;
/// acknowledged and dropped on 3.1.1, which has no reason codes), and counted.
pub(super) const SYS_PREFIX: &str = "$SYS";

impl BrokerShard {
    /// PUBLISH from a client.
    pub(super) fn handle_publish(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        mut publish: Publish,
    ) -> Result<(), Fault> {
        ShardCounters::add(&self.figures.counters().messages_received, 1);
        self.figures
            .count_received(publish.qos, publish.payload().len());
        self.cluster_side.cluster_acks.begin_cluster_ack();
        let Some(connection) = self.conns.get_mut(&conn) else {
            return Ok(());
        };
        if !publish.properties.subscription_identifiers.is_empty() {
            return Err(Fault::protocol(
                "a client's PUBLISH carries a Subscription Identifier",
            ));
        }
        if let Some(alias) = publish
            .properties
            .get_mut()
            .and_then(|p| p.topic_alias.take())
        {
            let topic = connection
                .resolve_topic_alias(
                    publish.content.shared_topic().as_shared_bytes(),
                    alias.get(),
                )
                .map_err(|e| Fault::new(e.reason_code(), e.to_string()))?;
            publish
                .content
                .set_topic(MqttStr::from_bytes(topic).map_err(Fault::from)?);
        }
        let client_id = client_id_of(&self.conns, &self.sessions, conn).unwrap_or_default();
        let topic =
            TopicName::from_mqtt_str(publish.content.shared_topic(), &self.shared.limits.topics)
                .map_err(|e| Fault::new(ReasonCode::TopicNameInvalid, e.to_string()))?;
        let (topic, delay) = self.delayed_target(&mut publish, topic)?;
        let topic = rewritten(&self.shared, &mut publish, topic, &client_id);
        let verdict =
            self.auth
                .admit_publish(&self.shared.access, conn, &publish, &client_id, &topic);
        if verdict == ReasonCode::NotAuthorized {
            ShardCounters::add(&self.figures.counters().publishes_not_authorized, 1);
        }
        match (publish.qos, publish.packet_id) {
            (QoS::AtMostOnce, _) => {
                if verdict == ReasonCode::Success {
                    self.accept_or_delay(ctx, conn, &client_id, (topic, delay), publish);
                }
            }
            (QoS::AtLeastOnce, Some(id)) => {
                let reason = match verdict {
                    ReasonCode::Success => {
                        self.accept_or_delay(ctx, conn, &client_id, (topic, delay), publish)
                    }
                    refused => refused,
                };
                let mut ack = PubAck::new(id);
                ack.reason_code = reason;
                self.send_ack(ctx, conn, Packet::PubAck(ack));
            }
            (QoS::ExactlyOnce, Some(id)) => {
                let limit = usize::from(self.shared.config.limits.receive_maximum);
                let session = self
                    .sessions
                    .get_mut(&client_id)
                    .ok_or_else(|| Fault::protocol("no session"))?;
                let reason = match session.record_awaiting_release(id, limit) {
                    InboundQos2::OverLimit => {
                        return Err(Fault::new(
                            ReasonCode::ReceiveMaximumExceeded,
                            "too many QoS 2 messages awaiting PUBREL",
                        ));
                    }
                    InboundQos2::Duplicate => ReasonCode::Success,
                    InboundQos2::New if verdict != ReasonCode::Success => {
                        session.release_awaiting(id);
                        verdict
                    }
                    InboundQos2::New => {
                        let expiry = session.expiry;
                        self.durable
                            .record_if(expiry, || SessionWrite::Qos2Received {
                                client_id: client_id.clone(),
                                packet_id: id,
                            });
                        let reason =
                            self.accept_or_delay(ctx, conn, &client_id, (topic, delay), publish);
                        if reason == ReasonCode::QuotaExceeded {
                            self.release_inbound_qos2(&client_id, id);
                        }
                        reason
                    }
                };
                let mut rec = PubRec::new(id);
                rec.reason_code = reason;
                self.send_ack(ctx, conn, Packet::PubRec(rec));
            }
            (_, None) => return Err(Fault::protocol("QoS 1/2 PUBLISH without packet id")),
        }
        Ok(())
    }

    /// Forwards an accepted PUBLISH; the reason code to acknowledge it with.
    pub(super) fn accept_publish(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        topic: TopicName,
        publish: Publish,
    ) -> ReasonCode {
        let publisher = self.sessions.get(client_id).map(|s| s.subscriber);
        let expiry = publish.properties.message_expiry_interval;
        let (topic_text, payload) = publish.content.into_parts();
        let flags = (publish.qos, publish.retain);
        post_published(&self.shared.links, client_id, &topic_text, flags, &payload);
        self.publish_internal(
            ctx,
            PublishInput {
                topic,
                topic_text,
                payload,
                qos: publish.qos,
                retain: publish.retain,
                properties: publish.properties.into_inner(),
                expiry,
                publisher,
                client_id,
                to_cluster: true,
            },
        )
    }

    /// Publishes a client's will.
    pub(super) fn publish_will(&mut self, ctx: &mut Ctx, client_id: &MqttStr, will: Will) {
        let judge = WillJudge::of(&self.shared, &self.figures, self.id);
        let wills = &mut self.auth.topic_waits.wills;
        if !judge.will_may_fire(wills, client_id, will.topic.as_str()) {
            return;
        }
        let Ok(topic) = TopicName::from_mqtt_str(will.topic.clone(), &self.shared.limits.topics)
        else {
            return;
        };
        let p = will.properties;
        let application = AppProperties::builder()
            .response_topic(p.response_topic)
            .correlation_data(p.correlation_data)
            .user_properties(p.user_properties)
            .content_type(p.content_type)
            .build();
        let Ok(application) = application else {
            // Not from the wire, where its length prefix bounds it: a will built in code.
            warn!(
                client = client_id.as_str(),
                "will not published: its correlation data is longer than 65,535 bytes"
            );
            return;
        };
        let properties = PublishProperties {
            payload_format: p.payload_format,
            message_expiry_interval: p.message_expiry_interval,
            application,
            ..PublishProperties::default()
        };
        debug!(
            client = client_id.as_str(),
            topic = topic.as_str(),
            "publishing will"
        );
        self.publish_internal(
            ctx,
            PublishInput {
                topic,
                topic_text: will.topic,
                payload: will.payload,
                qos: will.qos,
                retain: will.retain,
                expiry: properties.message_expiry_interval,
                properties,
                // The will's own connection is gone: no-local has no connection to exclude.
                publisher: None,
                client_id,
                to_cluster: true,
            },
        );
    }

    /// Encodes a message once, updates the retained index, and routes it.
    pub(super) fn publish_internal(
        &mut self,
        ctx: &mut Ctx,
        input: PublishInput<'_>,
    ) -> ReasonCode {
        // A message that may be kept (queued for QoS 1/2 sessions, or retained) gets its own
        // allocation; a QoS 0 message only passes through and keeps borrowing the receive buffer.
        let (topic_text, payload) = if input.qos != QoS::AtMostOnce || input.retain {
            (
                detach::string(&input.topic_text),
                detach::bytes(&input.payload),
            )
        } else {
            (input.topic_text, input.payload)
        };
        let Ok(shared) = SharedPublish::new(topic_text, payload, &input.properties) else {
            return ReasonCode::ImplementationSpecificError;
        };
        let key = self.cluster_side.message_keys.next(&self.shared.links);
        let flags = (input.qos, input.retain);
        let message = self.figures.message(ctx, shared, flags, input.expiry, key);
        let origin = Origin {
            publisher: input.publisher,
            client_id: input.client_id,
            to_cluster: input.to_cluster,
        };
        self.publish_message(ctx, &input.topic, &message, origin)
    }

    /// Publishes an encoded message to `topic`: the retained index, the cluster hand-off and
    /// routing to every matching session.
    pub(super) fn publish_message(
        &mut self,
        ctx: &mut Ctx,
        topic: &TopicName,
        message: &Arc<Message>,
        origin: Origin<'_>,
    ) -> ReasonCode {
        if message.retain {
            // A client's publish is stamped: after a restart the cluster compares the stamp
            // with the bucket's record (docs/cluster.md, "Retained messages").
            let accepted_at = origin.to_cluster.then(std::time::SystemTime::now);
            self.keep_retained(ctx, topic, message, accepted_at);
        }
        // Shared subscriptions of a clustered message are served through NATS's queue groups,
        // where this node's members take part in the choice (docs/cluster.md); while NATS is
        // down, here.
        let via_nats = self.shared.links.shares_served_by_cluster(topic);
        let clustered = origin.to_cluster
            && self
                .cluster_side
                .hand_to_cluster(&self.shared.links, self.id, message, !via_nats);
        let publisher = Publisher {
            subscriber: origin.publisher,
            client_id: origin.client_id.as_bytes(),
        };
        let scope = match clustered && via_nats {
            true => RouteScope::Plain,
            false => RouteScope::All,
        };
        let copies = self.route(ctx, topic, message, &publisher, scope);
        self.replication.kept.keep_if_recording(|| KeptMessage {
            topic: topic.clone(),
            message: Arc::clone(message),
            publisher: origin.publisher,
        });
        // With other nodes, subscribers elsewhere are unknown here: 0x10 only on a single node.
        if copies == 0 && !clustered {
            ReasonCode::NoMatchingSubscribers
        } else {
            ReasonCode::Success
        }
    }

    /// Matches `topic` and sends each matching session in `scope` its copy; the number of
    /// copies.
    pub(super) fn route(
        &mut self,
        ctx: &mut Ctx,
        topic: &TopicName,
        message: &Arc<Message>,
        publisher: &Publisher<'_>,
        scope: RouteScope<'_>,
    ) -> usize {
        let mut matches = mem::take(&mut self.delivery.routes.matches);
        self.replication
            .replica
            .table
            .match_topic(topic, publisher, &mut matches);
        let mut count = 0;
        for delivery in matches.iter() {
            if !scope.admits(delivery.subscriber, delivery.shared) {
                continue;
            }
            count += 1;
            let owner = self.replication.replica.owner(delivery.subscriber);
            let qos = message.qos.min(delivery.qos);
            let retain = message.retain && delivery.retain_as_published;
            if owner == self.id && qos == QoS::AtMostOnce {
                let copy = CopyView {
                    message,
                    qos,
                    retain,
                    sub_ids: delivery.subscription_ids,
                };
                if self.deliver_qos0_here(ctx, delivery.subscriber, copy) {
                    continue;
                }
            }
            let copy = BareCopy::new(
                qos,
                retain,
                delivery.subscription_ids,
                delivery.shared.cloned(),
            );
            self.send_copy(ctx, (owner, delivery.subscriber), message, copy);
        }
        self.delivery.routes.matches = matches;
        count
    }

    /// Sends `subscriber`'s copy of `message` to its session on shard `owner`: delivered here,
    /// or added to this turn's batch for that shard.
    pub(super) fn send_copy(
        &mut self,
        ctx: &mut Ctx,
        (owner, subscriber): (ShardId, SubscriberId),
        message: &Arc<Message>,
        copy: BareCopy,
    ) {
        if owner == self.id {
            let recipient = Recipient {
                subscriber,
                outgoing: copy.attach(Arc::clone(message)),
            };
            self.deliver_from(ctx, owner, false, recipient);
            return;
        }
        if copy.qos != QoS::AtMostOnce {
            self.durable.routed_remote_copies();
        }
        self.delivery.routes.route_buf[owner.index()].push(subscriber, message, copy);
    }
}

/// Everything [`BrokerShard::publish_internal`] needs to publish a message.
pub(super) struct PublishInput<'a> {
    pub topic: TopicName,
    pub topic_text: MqttStr,
    pub payload: Bytes,
    pub qos: QoS,
    pub retain: bool,
    pub properties: PublishProperties,
    pub expiry: Option<u32>,
    pub publisher: Option<SubscriberId>,
    pub client_id: &'a MqttStr,
    /// Whether it is also handed to the cluster (`[cluster]`): a message published on this
    /// node, not a `$SYS` value (per node) and never one that came from the cluster.
    pub to_cluster: bool,
}

/// Who a message comes from, for routing: the publishing session (no-local), its client id
/// (hash-publisher) and whether the cluster gets it (see [`PublishInput::to_cluster`]).
pub(super) struct Origin<'a> {
    pub publisher: Option<SubscriberId>,
    pub client_id: &'a MqttStr,
    pub to_cluster: bool,
}

impl AuthWaits {
    /// Success, or why a PUBLISH is acknowledged but not forwarded.
    fn admit_publish(
        &self,
        control: &AccessControl,
        conn: ConnId,
        publish: &Publish,
        client_id: &MqttStr,
        topic: &TopicName,
    ) -> ReasonCode {
        if publish.check_payload_format().is_err() {
            return ReasonCode::PayloadFormatInvalid;
        }
        if topic.as_str().starts_with(SYS_PREFIX) {
            debug!(
                topic = topic.as_str(),
                "client PUBLISH to $SYS refused: only the broker writes it"
            );
            return ReasonCode::NotAuthorized;
        }
        if !control
            .hook
            .authorize_publish(client_id.as_str(), topic.as_str())
            || !self.acl_allows_publish(control, conn, client_id, topic.as_str())
        {
            return ReasonCode::NotAuthorized;
        }
        ReasonCode::Success
    }
}

impl Figures {
    /// A message received this turn: `flags` are its QoS and RETAIN, `expiry` its Message
    /// Expiry Interval (from now), `key` its key in the cluster (0: none).
    pub(super) fn message(
        &mut self,
        ctx: &Ctx,
        publish: SharedPublish,
        flags: (QoS, bool),
        expiry: Option<u32>,
        key: u64,
    ) -> Arc<Message> {
        let expires_at = expiry.map(|secs| ctx.now() + Duration::from_secs(u64::from(secs)));
        Arc::new(Message {
            publish,
            qos: flags.0,
            retain: flags.1,
            expires_at,
            received_ns: self.turn_nanos(ctx),
            key,
        })
    }
}

impl Delivery {
    /// Sends this turn's batches to the other shards: at most one mailbox message per
    /// destination for copies routed here and one for copies forwarded for moved sessions.
    /// (`origin`: this shard; what it routed for QoS 1/2 is confirmed once `durable`.)
    pub(super) fn flush_routes(
        &mut self,
        ctx: &mut Ctx,
        durable: &mut Durability,
        figures: &Figures,
        origin: ShardId,
    ) {
        for index in 0..self.routes.route_buf.len() {
            let shard = ring_runtime::ShardId::new(index as u16);
            for forwarded in [true, false] {
                let buf = if forwarded {
                    &mut self.routes.forward_buf
                } else {
                    &mut self.routes.route_buf
                };
                if buf[index].is_empty() {
                    continue;
                }
                let copies = mem::take(&mut buf[index]);
                // Copies routed here for QoS 1/2: the shard confirms them once durable, and
                // this turn's acknowledgements wait for it (forwarded copies are confirmed by
                // the shard that forwards them).
                let confirm = durable
                    .confirm_ticket()
                    .filter(|_| !forwarded && copies.has_reliable());
                let message = ShardMsg::Deliver {
                    origin,
                    forwarded,
                    copies,
                    confirm,
                };
                if figures.post(ctx, shard, message) && confirm.is_some() {
                    durable.needs_confirmation(shard);
                }
            }
        }
    }
}

/// Hands a `message.published` event to the event hook, if it wants one for this topic.
pub(super) fn post_published(
    links: &crate::shared_parts::Links,
    client_id: &MqttStr,
    topic: &MqttStr,
    (qos, retain): (QoS, bool),
    payload: &bytes::Bytes,
) {
    // `wants_topic` asks each webhook whether it wants `message.published` at all, too.
    let Some(hook) = links.events.as_deref() else {
        return;
    };
    if hook.wants_topic(topic.as_bytes()) {
        hook.post(broker_api::BrokerEvent::MessagePublished {
            client_id: client_id.as_str().to_owned(),
            topic: topic.as_str().to_owned(),
            qos: qos as u8,
            retain,
            payload: payload.clone(),
        });
    }
}

/// `topic`, or where a `[[rewrite]]` rule sends a PUBLISH of `client_id` to it (then the
/// PUBLISH carries the new topic).
fn rewritten(
    shared: &Shared,
    publish: &mut Publish,
    topic: TopicName,
    client_id: &MqttStr,
) -> TopicName {
    let limits = &shared.limits.topics;
    let rules = &shared.topic_rules;
    let Some(rewritten) = rules.rewritten_topic(&topic, client_id, limits) else {
        return topic;
    };
    match MqttStr::try_from(rewritten.as_str().to_owned()) {
        Ok(text) => {
            publish.content.set_topic(text);
            rewritten
        }
        Err(_) => topic,
    }
}
