//! This shard's replica of the replicated state: the subscription table, the retained
//! messages, the owner of every session, and the reorder buffer that applies changes in the
//! shared order (`changes.rs` receives and applies them).

use std::sync::Arc;

use ring_runtime::ShardId;
use router::{
    ChangeOutcome, ReorderBuffer, RetainedStore, SubscribeOutcome, SubscriberId,
    SubscriptionChange, SubscriptionTable, TableConfig,
};

use super::FastMap;
use crate::config::Config;
use crate::message::{Change, Message};

/// What applying a change asks of the rest of the shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Applied {
    /// A subscription changed; `owner` holds the subscribing session (its acknowledgement
    /// waits for this shard: wake it). `delta`: 1 for a new subscription, -1 for a removed
    /// one, 0 for a replaced one or a removal of nothing.
    Subscription { owner: Option<ShardId>, delta: i32 },
    /// A session moved away from shard `from`: it is owed a fence behind everything this shard
    /// routed there.
    Moved {
        subscriber: SubscriberId,
        from: ShardId,
    },
    /// Nothing further.
    Other,
}

/// The replicated state one shard holds.
pub(super) struct ReplicaState {
    /// Every subscription of every shard's sessions.
    pub(super) table: SubscriptionTable,
    /// Every retained message.
    pub(super) retained: RetainedStore<Arc<Message>>,
    /// The shard that holds each session.
    pub(super) owners: FastMap<SubscriberId, ShardId>,
    /// Changes that arrived ahead of their turn.
    pub(super) changes: ReorderBuffer<Change>,
}

impl ReplicaState {
    /// An empty replica for shard `id` (its shared-group random seed differs per shard).
    pub(super) fn new(config: &Config, id: ShardId) -> Self {
        let table = SubscriptionTable::new(TableConfig {
            shared_strategy: config.routing.shared_strategy,
            random_seed: 0x853C_49E6_748F_EA9B ^ (id.index() as u64),
        });
        Self {
            table,
            retained: RetainedStore::new(),
            owners: FastMap::default(),
            changes: ReorderBuffer::new(config.runtime.max_pending_changes),
        }
    }

    /// Applies one change in its turn; says what the rest of the shard must do about it.
    pub(super) fn apply(&mut self, change: Change) -> Applied {
        match change {
            Change::Subscription(subscription) => {
                let (SubscriptionChange::Subscribe { subscriber, .. }
                | SubscriptionChange::Unsubscribe { subscriber, .. }) = &subscription;
                let owner = self.owner(*subscriber);
                let delta = match subscription.apply_to(&mut self.table) {
                    ChangeOutcome::Subscribed(SubscribeOutcome::New) => 1,
                    ChangeOutcome::Unsubscribed(Some(_)) => -1,
                    _ => 0,
                };
                Applied::Subscription { owner, delta }
            }
            Change::Owner { subscriber, shard } => match self.owners.insert(subscriber, shard) {
                Some(from) if from != shard => Applied::Moved { subscriber, from },
                _ => Applied::Other,
            },
            Change::Gone { subscriber } => {
                self.owners.remove(&subscriber);
                Applied::Other
            }
            Change::Retain { topic, message } => {
                match message {
                    Some(message) => {
                        let size = message.publish.payload().len() + topic.as_str().len();
                        self.retained.store(&topic, message, size);
                    }
                    None => {
                        self.retained.remove(&topic);
                    }
                }
                Applied::Other
            }
        }
    }

    /// The shard that holds `subscriber`'s session, as far as this replica knows.
    pub(super) fn owner(&self, subscriber: SubscriberId) -> Option<ShardId> {
        self.owners.get(&subscriber).copied()
    }

    /// Subscriptions in the table, shared memberships included.
    pub(super) fn subscription_count(&self) -> usize {
        let stats = self.table.stats();
        stats.subscriptions + stats.shared_members
    }
}
