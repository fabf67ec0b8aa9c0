//! Start-up: the recovered sessions dealt to the shards, each with a fresh subscriber key, a
//! shard (in turn) and an entry in the session directory, and the seed every replica starts
//! from. Runs once, before the shards are built; the store only reads and holds.

use std::sync::Arc;

use broker_api::cluster::AcceptedRetained;
use codec::MqttStr;
use ring_runtime::ShardId;
use router::{SubscriptionChange, TopicName};
use session_store::InflightState;
use session_store::storage::{StoredMessage, StoredSession};

use crate::directory::{SessionLocation, SessionOwner};
use crate::shared::Shared;
use crate::store::{RecoveredSession, Recovery, ReplicaSeed, message_from_stored};

/// Deals the recovered sessions to `shards` shards: each gets a fresh subscriber key, a shard
/// (in turn), and an entry in the session directory naming its stored owner (so another
/// identity is refused it after a restart too). Subscriptions and retained messages are
/// parsed once here for every replica; one that no longer parses (a stricter topic limit
/// since) is left out with a warning.
pub fn deal_recovered(
    recovery: &Recovery,
    shared: &Shared,
    sessions: Vec<(StoredSession, usize)>,
    retained: Vec<(MqttStr, StoredMessage)>,
    shards: usize,
) {
    let mut dealt: Vec<Vec<RecoveredSession>> = (0..shards).map(|_| Vec::new()).collect();
    let now = shared.time.clock.now();
    let limits = &shared.limits.topics;
    let mut accepted = Vec::new();
    let mut seed = ReplicaSeed {
        retained: (retained.iter())
            .filter_map(|(topic, stored)| {
                let name = TopicName::from_mqtt_str(topic.clone(), limits).ok()?;
                let message = message_from_stored(stored, now)?;
                if let Some(accepted_at) = stored.accepted_at {
                    let message = Arc::clone(&message);
                    accepted.push(AcceptedRetained {
                        message,
                        accepted_at,
                    });
                }
                Some((name, message))
            })
            .collect(),
        ..ReplicaSeed::default()
    };
    recovery.hold_accepted_retained(accepted);
    let mut outlines = Vec::with_capacity(sessions.len());
    for (index, (mut stored, queued_total)) in sessions.into_iter().enumerate() {
        let client_id = stored.client_id.clone();
        stored
            .subscriptions
            .retain(|sub| takes_exclusive_hold(shared, &client_id, sub.filter.as_str()));
        let shard = ShardId::new((index % shards) as u16);
        let subscriber = shared.directory.new_subscriber(shard);
        shared.directory.sessions.insert(
            Box::from(stored.client_id.as_str()),
            SessionLocation::new(
                (shard, subscriber),
                shared.directory.new_claim(),
                &SessionOwner::from_stored(&stored.owner),
            ),
        );
        seed.owners.push((subscriber, shard));
        for stored in &stored.subscriptions {
            let Some(filter) =
                (shared.topic_rules.exclusive.read(&stored.filter, limits)).map(|r| r.filter)
            else {
                tracing::warn!(
                    filter = stored.filter.as_str(),
                    "stored filter no longer valid: dropped"
                );
                continue;
            };
            seed.subscriptions.push(SubscriptionChange::Subscribe {
                subscriber,
                filter,
                options: stored.options,
                id: stored.id,
            });
        }
        outlines.push(outline(&stored));
        dealt[shard.index()].push(RecoveredSession {
            stored,
            subscriber,
            queued_total,
        });
    }
    recovery.hold(dealt, seed);
    recovery.hold_outlines(outlines);
}

/// `stored` without its messages: what the cluster link needs of it (its inflight packet ids,
/// each as a PUBREL owed, tell the catch-up after a restart which of the previous run's QoS 2
/// deliveries the store resends: docs/cluster.md, "Exactly once across a node's death").
fn outline(stored: &StoredSession) -> StoredSession {
    StoredSession {
        client_id: stored.client_id.clone(),
        protocol: stored.protocol,
        expiry: stored.expiry,
        will: None,
        owner: stored.owner.clone(),
        disconnected_at: stored.disconnected_at,
        subscriptions: stored.subscriptions.clone(),
        queued: Vec::new(),
        inflight: (stored.inflight.iter())
            .map(|(id, _)| (*id, InflightState::AwaitingPubComp))
            .collect(),
        awaiting_release: Vec::new(),
    }
}

/// Takes the hold of a recovered `$exclusive/` subscription for `client_id` (every other one
/// passes): `false` when another recovered session holds it already (a store written with
/// `routing.exclusive_subscriptions` off, read with it on), which leaves it out, warned.
fn takes_exclusive_hold(shared: &Shared, client_id: &MqttStr, text: &str) -> bool {
    let exclusive = &shared.topic_rules.exclusive;
    let Some(filter) = text.strip_prefix(crate::exclusive::PREFIX) else {
        return true;
    };
    if !exclusive.enabled() || exclusive.acquire(filter, client_id) {
        return true;
    }
    tracing::warn!(
        client = client_id.as_str(),
        filter = text,
        "recovered exclusive subscription held by another session: dropped"
    );
    false
}
