//! The shard's side of the cluster link, reached only through `broker_api`'s [`ClusterPort`]
//! in `Shared::links.cluster` (`None` on a single node; the `cluster` crate implements it, and
//! this crate does not name it): local publishes handed to it, local interest reported to it
//! (shard 0), and messages from other nodes (`ShardMsg::Cluster`) routed to local subscribers
//! only, or stored as retained.
//!
//! [`ClusterPort`]: broker_api::ClusterPort

use std::sync::Arc;

use codec::{MqttStr, SharedPublish};
use router::{Publisher, SharedFilter, SubscriberId, TopicName};
use session_store::InflightState;

use super::parts::ClusterSide;
use super::{BrokerShard, Ctx};
use crate::message::{Message, ShardMsg};
use crate::shared_parts::Links;
use broker_api::cluster::{ClusterPublish, Scope};
use ring_runtime::ShardId;

/// Which of the matching local subscriptions a routed message goes to.
#[derive(Debug, Clone, Copy)]
pub(super) enum RouteScope<'a> {
    /// All of them: a message published on this node.
    All,
    /// The non-shared ones: a message from the cluster through a plain NATS subscription.
    Plain,
    /// The non-shared ones but those of these sessions, which had the message read back for
    /// them alone (`Scope::PlainExcept`).
    PlainExcept(&'a [SubscriberId]),
    /// The one shared subscription with this whole `$share/...` text: a message from the
    /// cluster through that share's NATS queue group.
    Group(&'a str),
    /// The non-shared ones of one session: a message it missed while its node died, read
    /// back from the replay stream for it alone.
    Session(SubscriberId),
}

impl RouteScope<'_> {
    /// Whether a delivery to `subscriber` (`shared`: the group it was picked from) is in scope.
    pub(super) fn admits(self, subscriber: SubscriberId, shared: Option<&SharedFilter>) -> bool {
        match (self, shared) {
            (Self::All, _) => true,
            (Self::Plain, shared) => shared.is_none(),
            (Self::PlainExcept(had), shared) => shared.is_none() && !had.contains(&subscriber),
            (Self::Group(group), Some(shared)) => shared.as_str() == group,
            (Self::Group(_), None) => false,
            (Self::Session(only), shared) => shared.is_none() && subscriber == only,
        }
    }
}

impl BrokerShard {
    /// A message from another node: routed to this node's subscribers in its scope and never
    /// sent back to the cluster; or (scope `Retained`) a topic's retained message from the
    /// cluster's bucket, stored here and routed to no one.
    pub(super) fn publish_from_cluster(&mut self, ctx: &mut Ctx, publish: ClusterPublish) {
        if let Scope::Session(client_id) = &publish.scope
            && !self.session_lacks(ctx, client_id, &publish)
        {
            return;
        }
        let (Ok(topic), Ok(shared)) = (
            TopicName::from_mqtt_str(publish.topic.clone(), &self.shared.limits.topics),
            SharedPublish::from_parts(publish.topic, publish.payload, publish.properties),
        ) else {
            if let Some(link) = &self.shared.links.cluster {
                let why = "a message from NATS has an invalid topic";
                link.drop_inbound(why);
            }
            return;
        };
        let flags = (publish.qos, publish.retain);
        let message = (self.figures).message(ctx, shared, flags, publish.expiry, publish.key);
        let publisher = Publisher {
            subscriber: None,
            client_id: b"",
        };
        let had: Vec<SubscriberId>;
        let scope = match &publish.scope {
            Scope::Plain => RouteScope::Plain,
            Scope::PlainExcept(sessions) => {
                had = self.subscribers_of(sessions);
                RouteScope::PlainExcept(&had)
            }
            Scope::Group(group) => RouteScope::Group(group),
            Scope::Session(client_id) => {
                let sessions = &self.shared.directory.sessions;
                let Some(location) = sessions.get(client_id.as_str()) else {
                    return; // The session ended or moved meanwhile.
                };
                RouteScope::Session(location.subscriber)
            }
            Scope::Retained => return self.keep_retained_from_bucket(ctx, &topic, &message),
        };
        self.route(ctx, &topic, &message, &publisher, scope);
    }
}

impl BrokerShard {
    /// The subscribers of those of `sessions` that are on this node.
    fn subscribers_of(&self, sessions: &[MqttStr]) -> Vec<SubscriberId> {
        let directory = &self.shared.directory.sessions;
        let located = sessions.iter().filter_map(|id| directory.get(id.as_str()));
        located.map(|location| location.subscriber).collect()
    }

    /// Whether the session of `client_id` should get `publish`, a message read back for it
    /// alone (`Scope::Session`): not when it ended or moved meanwhile, nor when it holds a copy
    /// already (queued or in flight: it reached this node live while the session was being
    /// recovered here; docs/cluster.md, "Exactly once across a node's death"). A session on
    /// another shard is asked there: the message is passed on.
    fn session_lacks(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        publish: &ClusterPublish,
    ) -> bool {
        let located = (self.shared.directory.sessions.get(client_id.as_str()))
            .map(|location| (location.shard, location.subscriber));
        let Some((shard, subscriber)) = located else {
            return false; // The session ended or moved meanwhile.
        };
        if shard != self.id {
            let message = ShardMsg::Cluster(Box::new(publish.clone()));
            if ctx.post(shard, message).is_err()
                && let Some(link) = &self.shared.links.cluster
            {
                link.drop_inbound("a shard's mailbox refused a message read back for a session");
            }
            return false;
        }
        publish.key == 0 || !self.holds_copy_of(subscriber, publish.key)
    }

    /// Whether the session of `subscriber` (on this shard) has the message `key` queued or in
    /// flight.
    fn holds_copy_of(&self, subscriber: SubscriberId, key: u64) -> bool {
        let Some(session) = self
            .sessions
            .locate(subscriber)
            .and_then(|at| self.sessions.at(at))
        else {
            return false;
        };
        let in_flight = session.inflight.iter().any(|(_, state)| match state {
            InflightState::AwaitingPubAck(copy) | InflightState::AwaitingPubRec(copy) => {
                copy.message.key == key
            }
            InflightState::AwaitingPubComp => false,
        });
        in_flight || session.queue.iter().any(|copy| copy.message.key == key)
    }
}

impl ClusterSide {
    /// Hands a message published on this node to the cluster (nothing on a single node;
    /// `shares_served`: this node serves its shared subscriptions); whether it was a node of a
    /// cluster.
    /// A QoS 1/2 message's acknowledgement then waits until the cluster settled it
    /// (`cluster_acks.rs`).
    pub(super) fn hand_to_cluster(
        &mut self,
        links: &Links,
        shard: ShardId,
        message: &Arc<Message>,
        shares_served: bool,
    ) -> bool {
        if links.cluster.is_none() {
            return false;
        }
        let number = self.cluster_ack_number(links, message.qos);
        let settle = number.map(|number| (shard, number));
        let queued = links
            .cluster
            .as_ref()
            .is_some_and(|link| link.send(message, shares_served, settle));
        match (queued, number) {
            (true, Some(number)) => self.cluster_acks.cluster_ack_handed(number),
            // Dropped while NATS is up: its publisher is refused, not told it was kept.
            (false, Some(_)) => self.cluster_acks.queue_full = true,
            (_, None) => {}
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use router::{SharedFilter, SubscriberId, TopicLimits};

    use super::RouteScope;

    #[test]
    fn a_scope_admits_its_own_deliveries_only() {
        let limits = TopicLimits::default();
        let g = SharedFilter::new("$share/g/a/#", &limits).unwrap();
        let h = SharedFilter::new("$share/h/a/#", &limits).unwrap();
        let (one, other) = (SubscriberId(1), SubscriberId(2));
        assert!(RouteScope::All.admits(one, None) && RouteScope::All.admits(one, Some(&g)));
        assert!(RouteScope::Plain.admits(one, None) && !RouteScope::Plain.admits(one, Some(&g)));
        let group = RouteScope::Group("$share/g/a/#");
        assert!(group.admits(one, Some(&g)));
        assert!(!group.admits(one, Some(&h)) && !group.admits(one, None));
        let except = [other];
        let plain_except = RouteScope::PlainExcept(&except);
        assert!(plain_except.admits(one, None) && !plain_except.admits(other, None));
        assert!(!plain_except.admits(one, Some(&g)));
        let session = RouteScope::Session(one);
        assert!(session.admits(one, None));
        assert!(!session.admits(other, None) && !session.admits(one, Some(&g)));
    }
}
