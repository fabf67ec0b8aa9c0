//! SUBSCRIBE and UNSUBSCRIBE: per-filter checks and reason codes, replication of the change to
//! every shard, and which new subscriptions get the retained messages (sent as the
//! connection drains: `retained_delivery.rs`).

use broker_api::{BrokerEvent, EventKind};

use codec::{
    MqttStr, Packet, QoS, ReasonCode, RetainHandling, SubAck, Subscribe, SubscriptionId,
    SubscriptionOptions, UnsubAck, Unsubscribe,
};
use ring_runtime::ConnId;
use router::{ChangeSeq, SubscriptionChange, SubscriptionFilter};

use super::ack_gate::{RetainedDue, RetainedOwed};
use super::parts::SubscriptionBook;
use super::{BrokerShard, Ctx, Fault, client_id_of};
use crate::detach;
use crate::exclusive::PREFIX;
use crate::message::Change;
use crate::session::SessionSubscription;
use session_store::storage::SessionWrite;

impl BrokerShard {
    /// SUBSCRIBE: a reason code per filter, then retained messages per retain handling.
    pub(super) fn handle_subscribe(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        subscribe: Subscribe,
    ) -> Result<(), Fault> {
        let Some(client_id) = client_id_of(&self.conns, &self.sessions, conn) else {
            return Ok(());
        };
        let id = subscribe.properties.subscription_identifier;
        let mut reason_codes = Vec::with_capacity(subscribe.filters.len());
        let mut retained_for = Vec::new();
        let mut last_change = None;
        for (text, options) in subscribe.filters {
            let owed = &mut retained_for;
            let (reason, change) =
                self.subscribe_filter(ctx, conn, &client_id, (&text, options, id), owed)?;
            reason_codes.push(reason);
            last_change = change.or(last_change);
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
        let packet = Some(Packet::SubAck(suback));
        self.subscriptions_changed(ctx, conn, client_id, last_change, (packet, retained_for));
        Ok(())
    }

    /// One filter of a SUBSCRIBE (or of `[[auto_subscribe]]`): its SUBACK code and the change
    /// it made; the retained delivery it is owed goes to `retained_for`.
    pub(super) fn subscribe_filter(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        client_id: &MqttStr,
        (text, options, id): (&MqttStr, SubscriptionOptions, Option<SubscriptionId>),
        retained_for: &mut RetainedDue,
    ) -> Result<(ReasonCode, Option<ChangeSeq>), Fault> {
        let subscribed =
            (self.subscriptions()).subscribe_one(ctx, conn, client_id, text, options, id)?;
        let (granted, filter, is_new, seq, key) = match subscribed {
            Ok(subscribed) => subscribed,
            Err(reason) => return Ok((reason, None)),
        };
        if wants_retained(&filter, options.retain_handling, is_new) {
            retained_for.push(RetainedOwed {
                key,
                filter,
                granted,
                id,
            });
        }
        Ok((granted_code(granted), Some(seq)))
    }

    /// UNSUBSCRIBE: Success or No subscription existed per filter (0x8F for a bad filter).
    pub(super) fn handle_unsubscribe(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        unsubscribe: Unsubscribe,
    ) {
        let Some(client_id) = client_id_of(&self.conns, &self.sessions, conn) else {
            return;
        };
        let mut reason_codes = Vec::with_capacity(unsubscribe.filters.len());
        let mut last_change = None;
        for text in &unsubscribe.filters {
            // The text the session holds the subscription under (a rewrite rule's result).
            let text = &(self.shared.topic_rules).filter_text(text, client_id.as_str());
            self.delivery.retained.stop(conn, text);
            let (reason, change) = self.subscriptions().unsubscribe_one(ctx, &client_id, text);
            reason_codes.push(reason);
            last_change = change.or(last_change);
        }
        let unsuback = UnsubAck {
            packet_id: unsubscribe.packet_id,
            reason_codes,
            properties: Default::default(),
        };
        // Like SUBACK: once the client sees UNSUBACK, no shard adds new messages for the filter.
        let packet = Some(Packet::UnsubAck(unsuback));
        self.subscriptions_changed(ctx, conn, client_id, last_change, (packet, Vec::new()));
    }

    /// After a SUBSCRIBE or UNSUBSCRIBE: the session's subscriptions are mirrored to the
    /// cluster when they changed (`last_change`), and `ack` (SUBACK and the retained messages
    /// due, or UNSUBACK) leaves once every shard applied the change.
    pub(super) fn subscriptions_changed(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        client_id: MqttStr,
        last_change: Option<ChangeSeq>,
        (packet, retained_due): (Option<Packet>, RetainedDue),
    ) {
        if last_change.is_some() {
            let (links, sessions) = (&self.shared.links, &self.sessions);
            self.cluster_side
                .mirror_subscriptions(links, sessions, ctx, &client_id);
        }
        self.ack_when_applied(ctx, conn, last_change, packet, retained_due);
    }
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

impl SubscriptionBook<'_> {
    /// One filter of a SUBSCRIBE: the granted QoS, the filter, whether it is new, its change
    /// and the text the session keys it by; or the refusal reason. A protocol violation ends
    /// the connection.
    #[allow(clippy::type_complexity)]
    fn subscribe_one(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        client_id: &MqttStr,
        text: &MqttStr,
        options: SubscriptionOptions,
        id: Option<SubscriptionId>,
    ) -> Result<Result<(QoS, SubscriptionFilter, bool, ChangeSeq, MqttStr), ReasonCode>, Fault>
    {
        // Kept by the session for its life: detached from the receive buffer.
        let text = &detach::string(text);
        let text = &(self.shared.topic_rules).filter_text(text, client_id.as_str());
        let Some(read) = self
            .shared
            .topic_rules
            .exclusive
            .read(text, &self.shared.limits.topics)
        else {
            return Ok(Err(ReasonCode::TopicFilterInvalid));
        };
        let filter = read.filter;
        if matches!(filter, SubscriptionFilter::Shared(_)) && options.no_local {
            return Err(Fault::protocol("No Local set on a shared subscription"));
        }
        if !self
            .shared
            .access
            .hook
            .authorize_subscribe(client_id.as_str(), text.as_str())
        {
            return Ok(Err(ReasonCode::NotAuthorized));
        }
        if let Err(refused) =
            self.auth
                .acl_admits_subscription(&self.shared.access, conn, client_id, text.as_str())
        {
            return Ok(Err(refused));
        }
        let max = self.shared.config.limits.max_subscriptions_per_client as usize;
        let Some(session) = self.sessions.get_mut(client_id) else {
            return Ok(Err(ReasonCode::UnspecifiedError));
        };
        let is_new = !session.subscriptions.contains_key(text);
        if is_new && session.subscriptions.len() >= max {
            return Ok(Err(ReasonCode::QuotaExceeded));
        }
        let exclusive = &self.shared.topic_rules.exclusive;
        if read.exclusive && !exclusive.acquire(&text.as_str()[PREFIX.len()..], client_id) {
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
        let expiry = session.expiry;
        if self.durable.stores(expiry) {
            self.durable.record(SessionWrite::Subscribed {
                client_id: client_id.clone(),
                filter: text.clone(),
                options,
                id,
            });
        }
        if is_new {
            self.figures.gauges.subscriptions += 1;
        }
        if let Some(hook) = self.shared.links.events_of(EventKind::SessionSubscribed) {
            hook.post(BrokerEvent::SessionSubscribed {
                client_id: client_id.as_str().to_owned(),
                filter: text.as_str().to_owned(),
                qos: granted as u8,
            });
        }
        let change = SubscriptionChange::Subscribe {
            subscriber,
            filter: filter.clone(),
            options,
            id,
        };
        let seq = self
            .figures
            .broadcast(ctx, &self.shared.order, Change::Subscription(change));
        Ok(Ok((granted, filter, is_new, seq, text.clone())))
    }

    fn unsubscribe_one(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        text: &MqttStr,
    ) -> (ReasonCode, Option<ChangeSeq>) {
        let exclusive = &self.shared.topic_rules.exclusive;
        if exclusive.read(text, &self.shared.limits.topics).is_none() {
            return (ReasonCode::TopicFilterInvalid, None);
        }
        if self.sessions.get(client_id).is_none() {
            return (ReasonCode::UnspecifiedError, None);
        }
        let Some(seq) = self.remove_subscription(ctx, client_id, text) else {
            return (ReasonCode::NoSubscriptionExisted, None);
        };
        if let Some(hook) = self.shared.links.events_of(EventKind::SessionUnsubscribed) {
            hook.post(BrokerEvent::SessionUnsubscribed {
                client_id: client_id.as_str().to_owned(),
                filter: text.as_str().to_owned(),
            });
        }
        (ReasonCode::Success, Some(seq))
    }

    /// Removes `client_id`'s subscription `text` from its session, the store and (replicated)
    /// the router; `None` when it had none.
    pub(super) fn remove_subscription(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        text: &MqttStr,
    ) -> Option<ChangeSeq> {
        let session = self.sessions.get_mut(client_id)?;
        let removed = session.subscriptions.remove(text)?;
        self.shared
            .topic_rules
            .exclusive
            .release(text.as_str(), client_id);
        let subscriber = session.subscriber;
        let expiry = session.expiry;
        if self.durable.stores(expiry) {
            self.durable.record(SessionWrite::Unsubscribed {
                client_id: client_id.clone(),
                filter: text.clone(),
            });
        }
        self.figures.gauges.subscriptions = self.figures.gauges.subscriptions.saturating_sub(1);
        let change = SubscriptionChange::Unsubscribe {
            subscriber,
            filter: removed.filter,
        };
        Some(
            self.figures
                .broadcast(ctx, &self.shared.order, Change::Subscription(change)),
        )
    }
}
