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
use crate::directory::birth_shard;
use crate::message::{Change, Message, SentChange};

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
    /// The shard that holds each session that has moved away from the shard its subscriber
    /// key was handed out on (`directory::birth_shard`); every other session is held there. Only
    /// moves cost memory, however many shards replicate this.
    pub(super) moved_owners: FastMap<SubscriberId, ShardId>,
    /// Changes that arrived ahead of their turn.
    pub(super) changes: ReorderBuffer<SentChange>,
}

impl ReplicaState {
    /// An empty replica for shard `id` (its shared-group random seed differs per shard),
    /// choosing shared-subscription members by `shared_strategy` and holding at most
    /// `max_pending_changes` changes that arrive ahead of their turn.
    pub(super) fn new(
        shared_strategy: router::SharedStrategy,
        max_pending_changes: usize,
        id: ShardId,
    ) -> Self {
        let table = SubscriptionTable::new(TableConfig {
            shared_strategy,
            random_seed: 0x853C_49E6_748F_EA9B ^ (id.index() as u64),
        });
        Self {
            table,
            retained: RetainedStore::new(),
            moved_owners: FastMap::default(),
            changes: ReorderBuffer::new(max_pending_changes),
        }
    }

    /// Applies one change in its turn; says what the rest of the shard must do about it.
    pub(super) fn apply(&mut self, change: Change) -> Applied {
        match change {
            Change::Subscription(subscription) => {
                let (SubscriptionChange::Subscribe { subscriber, .. }
                | SubscriptionChange::Unsubscribe { subscriber, .. }) = &subscription;
                let owner = Some(self.owner(*subscriber));
                let delta = match subscription.apply_to(&mut self.table) {
                    ChangeOutcome::Subscribed(SubscribeOutcome::New) => 1,
                    ChangeOutcome::Unsubscribed(Some(_)) => -1,
                    _ => 0,
                };
                Applied::Subscription { owner, delta }
            }
            Change::Owner { subscriber, shard } => {
                let from = self.owner(subscriber);
                self.set_owner(subscriber, shard);
                if from == shard {
                    Applied::Other
                } else {
                    Applied::Moved { subscriber, from }
                }
            }
            Change::Gone { subscriber } => {
                self.moved_owners.remove(&subscriber);
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

    /// The shard that holds `subscriber`'s session, as far as this replica knows. For a
    /// session that has ended, the shard it was created on, which finds no session there and
    /// counts the copy as dropped (offline).
    pub(super) fn owner(&self, subscriber: SubscriberId) -> ShardId {
        self.moved_owners
            .get(&subscriber)
            .copied()
            .unwrap_or_else(|| birth_shard(subscriber))
    }

    /// Records that `shard` holds `subscriber`'s session (no entry where it was created).
    pub(super) fn set_owner(&mut self, subscriber: SubscriberId, shard: ShardId) {
        if shard == birth_shard(subscriber) {
            self.moved_owners.remove(&subscriber);
        } else {
            self.moved_owners.insert(subscriber, shard);
        }
    }

    /// Subscriptions in the table, shared memberships included.
    pub(super) fn subscription_count(&self) -> usize {
        let stats = self.table.stats();
        stats.subscriptions + stats.shared_members
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica() -> ReplicaState {
        ReplicaState::new(router::SharedStrategy::RoundRobin, 65_536, ShardId::new(0))
    }

    fn subscriber_born_on(shard: u16, count: u64) -> SubscriberId {
        SubscriberId(count << crate::directory::BIRTH_SHARD_BITS | u64::from(shard))
    }

    fn owner_change(subscriber: SubscriberId, shard: u16) -> Change {
        Change::Owner {
            subscriber,
            shard: ShardId::new(shard),
        }
    }

    #[test]
    fn a_session_held_where_it_was_created_takes_no_entry() {
        let mut replica = replica();
        let subscriber = subscriber_born_on(1, 7);
        assert_eq!(replica.apply(owner_change(subscriber, 1)), Applied::Other);
        assert_eq!(replica.owner(subscriber), ShardId::new(1));
        assert!(replica.moved_owners.is_empty());
    }

    #[test]
    fn a_move_is_recorded_fenced_and_forgotten_on_the_way_back() {
        let mut replica = replica();
        let subscriber = subscriber_born_on(1, 7);
        replica.apply(owner_change(subscriber, 1));
        let moved = replica.apply(owner_change(subscriber, 3));
        let from = ShardId::new(1);
        assert_eq!(moved, Applied::Moved { subscriber, from });
        assert_eq!(replica.owner(subscriber), ShardId::new(3));
        assert_eq!(replica.moved_owners.len(), 1);
        let back = replica.apply(owner_change(subscriber, 1));
        let from = ShardId::new(3);
        assert_eq!(back, Applied::Moved { subscriber, from });
        assert!(replica.moved_owners.is_empty());
    }

    #[test]
    fn an_ended_session_that_had_moved_leaves_no_entry() {
        let mut replica = replica();
        let subscriber = subscriber_born_on(2, 9);
        replica.apply(owner_change(subscriber, 2));
        replica.apply(owner_change(subscriber, 0));
        assert_eq!(replica.apply(Change::Gone { subscriber }), Applied::Other);
        assert!(replica.moved_owners.is_empty());
        // Copies still in flight for it go to where it was created, which drops them.
        assert_eq!(replica.owner(subscriber), ShardId::new(2));
    }
}
