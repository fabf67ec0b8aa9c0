//! SUBSCRIBE and UNSUBSCRIBE: per-filter checks and reason codes, replication of the change to
//! every shard, and retained messages for new subscriptions.

use std::sync::Arc;

use codec::{
    MqttStr, Packet, QoS, ReasonCode, RetainHandling, SubAck, Subscribe, SubscriptionId,
    SubscriptionOptions, UnsubAck, Unsubscribe,
};
use ring_runtime::ConnId;
use router::{ChangeSeq, SubscriptionChange, SubscriptionFilter};

use super::{BrokerShard, Ctx, Fault};
use crate::detach;
use crate::message::{Change, Expiry, Message, Outgoing};
use crate::session::SessionSubscription;

impl BrokerShard {
    /// SUBSCRIBE: a reason code per filter, then retained messages per retain handling.
    pub(super) fn handle_subscribe(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        subscribe: Subscribe,
    ) -> Result<(), Fault> {
        let Some(client_id) = self.conns.get(&conn).and_then(|c| c.client_id.clone()) else {
            return Ok(());
        };
        let id = subscribe.properties.subscription_identifier;
        let mut reason_codes = Vec::with_capacity(subscribe.filters.len());
        let mut retained_for = Vec::new();
        let mut last_change = None;
        for (text, options) in subscribe.filters {
            match self.subscribe_one(ctx, &client_id, &text, options, id)? {
                Ok((granted, filter, is_new, seq)) => {
                    last_change = Some(seq);
                    reason_codes.push(granted_code(granted));
                    if wants_retained(&filter, options.retain_handling, is_new) {
                        retained_for.push((filter, granted, id));
                    }
                }
                Err(reason) => reason_codes.push(reason),
            }
        }
        let protocol = self.conns.get(&conn).map(|c| c.protocol);
        if protocol.is_some_and(|p| !p.is_v5()) {
            reason_codes
                .iter_mut()
                .filter(|r| r.is_error())
                .for_each(|r| *r = ReasonCode::UnspecifiedError);
        }
        let suback = SubAck {
            packet_id: subscribe.packet_id,
            reason_codes,
            properties: Default::default(),
        };
        // The SUBACK waits until every shard has applied the change (each one that applies it
        // wakes this shard), so any PUBLISH sent after the SUBACK, by any client, matches it.
        let after = last_change.or_else(|| {
            let earlier = self.pending_subacks.iter().rev().find(|p| p.conn == conn);
            earlier.map(|p| p.after)
        });
        let pending = PendingSubAck {
            conn,
            client_id,
            after: after.unwrap_or(ChangeSeq(0)),
            suback,
            retained_for,
        };
        if after.is_some() {
            self.pending_subacks.push(pending);
        } else {
            self.finish_subscribe(ctx, pending);
        }
        Ok(())
    }

    /// Sends the SUBACKs whose subscription changes every shard has applied.
    pub(super) fn release_subacks(&mut self, ctx: &mut Ctx) {
        if self.pending_subacks.is_empty() {
            return;
        }
        let applied = self.applied_everywhere();
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending_subacks)
            .into_iter()
            .partition(|p| p.after < applied);
        self.pending_subacks = waiting;
        for pending in ready {
            self.finish_subscribe(ctx, pending);
        }
    }

    /// SUBACK, then the retained messages for the new subscriptions.
    fn finish_subscribe(&mut self, ctx: &mut Ctx, pending: PendingSubAck) {
        let PendingSubAck {
            conn,
            client_id,
            suback,
            retained_for,
            ..
        } = pending;
        self.send_packet(ctx, conn, &Packet::SubAck(suback));
        for (filter, granted, id) in retained_for {
            self.send_retained(ctx, &client_id, &filter, granted, id);
        }
    }

    /// One filter of a SUBSCRIBE: the granted QoS, the filter and whether it is new; or the
    /// refusal reason. A protocol violation ends the connection.
    #[allow(clippy::type_complexity)]
    fn subscribe_one(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        text: &MqttStr,
        options: SubscriptionOptions,
        id: Option<SubscriptionId>,
    ) -> Result<Result<(QoS, SubscriptionFilter, bool, ChangeSeq), ReasonCode>, Fault> {
        // Kept by the session for its life: detached from the receive buffer.
        let text = &detach::string(text);
        let Ok(filter) = SubscriptionFilter::from_bytes(
            text.as_shared_bytes().clone(),
            &self.shared.topic_limits,
        ) else {
            return Ok(Err(ReasonCode::TopicFilterInvalid));
        };
        if matches!(filter, SubscriptionFilter::Shared(_)) && options.no_local {
            return Err(Fault::protocol("No Local set on a shared subscription"));
        }
        if !self
            .shared
            .auth
            .authorize_subscribe(client_id.as_str(), text.as_str())
        {
            return Ok(Err(ReasonCode::NotAuthorized));
        }
        let max = self.shared.config.limits.max_subscriptions_per_client as usize;
        let Some(session) = self.sessions.get_mut(client_id) else {
            return Ok(Err(ReasonCode::UnspecifiedError));
        };
        let is_new = !session.subscriptions.contains_key(text);
        if is_new && session.subscriptions.len() >= max {
            return Ok(Err(ReasonCode::QuotaExceeded));
        }
        let granted = options.qos.min(QoS::ExactlyOnce);
        let options = SubscriptionOptions {
            qos: granted,
            ..options
        };
        let record = SessionSubscription {
            filter: filter.clone(),
            options,
            id,
        };
        session.subscriptions.insert(text.clone(), record);
        let subscriber = session.subscriber;
        if is_new {
            self.subscriptions += 1;
        }
        let change = SubscriptionChange::Subscribe {
            subscriber,
            filter: filter.clone(),
            options,
            id,
        };
        let seq = self.broadcast(ctx, Change::Subscription(change));
        Ok(Ok((granted, filter, is_new, seq)))
    }

    /// Sends the retained messages matching a new subscription (RETAIN set, as the spec says).
    fn send_retained(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        filter: &SubscriptionFilter,
        granted: QoS,
        id: Option<SubscriptionId>,
    ) {
        let SubscriptionFilter::Plain(topic_filter) = filter else {
            return;
        };
        let now = ctx.now();
        let messages: Vec<Arc<Message>> = self
            .retained
            .matching(topic_filter)
            .map(|(_, message)| Arc::clone(message))
            .filter(|m| m.expiry(now) != Expiry::Expired)
            .collect();
        let Some(subscriber) = self.sessions.get(client_id).map(|s| s.subscriber) else {
            return;
        };
        for message in messages {
            let outgoing = Outgoing {
                qos: message.qos.min(granted),
                retain: true,
                sub_ids: id.into_iter().collect(),
                shared: None,
                message,
            };
            self.deliver(
                ctx,
                crate::message::Recipient {
                    subscriber,
                    outgoing,
                },
            );
        }
    }

    /// UNSUBSCRIBE: Success or No subscription existed per filter (0x8F for a bad filter).
    pub(super) fn handle_unsubscribe(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        unsubscribe: Unsubscribe,
    ) {
        let Some(client_id) = self.conns.get(&conn).and_then(|c| c.client_id.clone()) else {
            return;
        };
        let mut reason_codes = Vec::with_capacity(unsubscribe.filters.len());
        for text in &unsubscribe.filters {
            let reason = self.unsubscribe_one(ctx, &client_id, text);
            reason_codes.push(reason);
        }
        let unsuback = UnsubAck {
            packet_id: unsubscribe.packet_id,
            reason_codes,
            properties: Default::default(),
        };
        self.send_packet(ctx, conn, &Packet::UnsubAck(unsuback));
    }

    fn unsubscribe_one(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        text: &MqttStr,
    ) -> ReasonCode {
        if SubscriptionFilter::from_bytes(text.as_shared_bytes().clone(), &self.shared.topic_limits)
            .is_err()
        {
            return ReasonCode::TopicFilterInvalid;
        }
        let Some(session) = self.sessions.get_mut(client_id) else {
            return ReasonCode::UnspecifiedError;
        };
        let Some(removed) = session.subscriptions.remove(text) else {
            return ReasonCode::NoSubscriptionExisted;
        };
        let subscriber = session.subscriber;
        self.subscriptions = self.subscriptions.saturating_sub(1);
        let change = SubscriptionChange::Unsubscribe {
            subscriber,
            filter: removed.filter,
        };
        self.broadcast(ctx, Change::Subscription(change));
        ReasonCode::Success
    }
}

/// A SUBACK waiting for its subscription changes to be applied on every shard.
#[derive(Debug)]
pub(super) struct PendingSubAck {
    conn: ConnId,
    client_id: MqttStr,
    /// The last change of this SUBSCRIBE.
    after: ChangeSeq,
    suback: SubAck,
    retained_for: Vec<(SubscriptionFilter, QoS, Option<SubscriptionId>)>,
}

/// The SUBACK code for a granted QoS.
fn granted_code(qos: QoS) -> ReasonCode {
    match qos {
        QoS::AtMostOnce => ReasonCode::Success,
        QoS::AtLeastOnce => ReasonCode::GrantedQoS1,
        QoS::ExactlyOnce => ReasonCode::GrantedQoS2,
    }
}

/// Whether a subscription gets the retained messages now (never for shared subscriptions).
fn wants_retained(filter: &SubscriptionFilter, handling: RetainHandling, is_new: bool) -> bool {
    matches!(filter, SubscriptionFilter::Plain(_))
        && match handling {
            RetainHandling::SendAtSubscribe => true,
            RetainHandling::SendIfNew => is_new,
            RetainHandling::DoNotSend => false,
        }
}
