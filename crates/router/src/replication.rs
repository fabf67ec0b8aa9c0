//! Subscription replication across shards: every shard owns a full [`Replica`] of the table and
//! applies the same totally ordered stream of [`SubscriptionChange`]s, so that matching takes no
//! lock. The order comes from a shared lock-free [`Sequencer`]; changes travel over the
//! runtime's mailboxes, may arrive out of order from different origin shards, and are put back
//! in order by a [`ReorderBuffer`]. Its window does not bound it: a change that arrives `window`
//! or more places past the next one expected is kept all the same and only reported
//! ([`Received::BeyondWindow`]; the broker counts it and logs it), since a dropped change would
//! leave a gap that stops every later one. Only duplicates are dropped. (The broker's shards use
//! a `ReorderBuffer` of their own change type directly rather than [`Replica`].)
//! ARCHITECTURE.md describes the protocol: its bird's-eye view, the "Reorder buffer" entry of
//! "Threads and the bounded queues between them", and the replicated-changes invariant under
//! "Invariants".

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use codec::{SubscriptionId, SubscriptionOptions};

use crate::filter::SubscriptionFilter;
use crate::subscription::{SubscribeOutcome, SubscriberId, Subscription};
use crate::table::{SubscriptionTable, TableConfig};

/// A position in the total order of changes, starting at 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChangeSeq(pub u64);

/// Hands out sequence numbers: shared by all shards (e.g. in an `Arc`), lock-free.
///
/// The shard that stamps a change must send it to every replica (its own included) before it
/// stamps anything else, so that a gap in the sequence is only ever a change in flight.
#[derive(Debug, Default)]
pub struct Sequencer {
    next: AtomicU64,
}

impl Sequencer {
    /// A sequencer whose first number is 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next sequence number.
    pub fn next(&self) -> ChangeSeq {
        ChangeSeq(self.next.fetch_add(1, Ordering::Relaxed))
    }
}

/// A change stamped with its place in the total order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequenced<T> {
    /// Its place in the order.
    pub seq: ChangeSeq,
    /// The change.
    pub change: T,
}

/// A subscription change, as shipped from the shard that received the SUBSCRIBE or
/// UNSUBSCRIBE to every replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscriptionChange {
    /// [`SubscriptionTable::subscribe`].
    Subscribe {
        /// Who subscribes.
        subscriber: SubscriberId,
        /// To what.
        filter: SubscriptionFilter,
        /// With which options.
        options: SubscriptionOptions,
        /// With which subscription identifier.
        id: Option<SubscriptionId>,
    },
    /// [`SubscriptionTable::unsubscribe`].
    Unsubscribe {
        /// Who unsubscribes.
        subscriber: SubscriberId,
        /// From what.
        filter: SubscriptionFilter,
    },
}

/// What applying a change did to a replica's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeOutcome {
    /// The result of a subscribe (new or replaced: retain handling 1 needs it).
    Subscribed(SubscribeOutcome),
    /// The removed subscription, `None` when there was none.
    Unsubscribed(Option<Subscription>),
}

impl SubscriptionChange {
    /// Applies the change to `table`.
    pub fn apply_to(&self, table: &mut SubscriptionTable) -> ChangeOutcome {
        match self {
            Self::Subscribe {
                subscriber,
                filter,
                options,
                id,
            } => ChangeOutcome::Subscribed(table.subscribe(*subscriber, filter, *options, *id)),
            Self::Unsubscribe { subscriber, filter } => {
                ChangeOutcome::Unsubscribed(table.unsubscribe(*subscriber, filter))
            }
        }
    }
}

/// What happened to a change handed to a [`ReorderBuffer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Kept until it is its turn (it may be its turn already).
    Accepted,
    /// Kept like [`Received::Accepted`], but further ahead than the window: a sign that an
    /// earlier change is long in flight (the caller reports it). Never dropped: a change that
    /// is lost leaves a gap that stops every later change.
    BeyondWindow,
    /// Already applied or already waiting: dropped (redelivery is harmless).
    Duplicate,
}

/// Puts a stream of [`Sequenced`] items back in order. Items that arrive early are held; one
/// `window` or more places past the next expected is still held, and reported as
/// [`Received::BeyondWindow`].
#[derive(Debug, Clone)]
pub struct ReorderBuffer<T> {
    next: u64,
    pending: VecDeque<Option<T>>,
    window: usize,
}

impl<T> ReorderBuffer<T> {
    /// An empty buffer expecting sequence number 0 next.
    pub fn new(window: usize) -> Self {
        Self {
            next: 0,
            pending: VecDeque::new(),
            window,
        }
    }

    /// The sequence number that is applied next (everything before it has been).
    pub fn next_expected(&self) -> ChangeSeq {
        ChangeSeq(self.next)
    }

    /// Number of items waiting for an earlier one.
    pub fn waiting(&self) -> usize {
        self.pending.iter().filter(|slot| slot.is_some()).count()
    }

    /// Takes in `item`: kept until its turn, or dropped as a duplicate. The sequence numbers
    /// come from one [`Sequencer`], so an item far ahead is one whose predecessors are still in
    /// flight: it is kept however far ahead it is.
    pub fn receive(&mut self, item: Sequenced<T>) -> Received {
        let Some(offset) = item.seq.0.checked_sub(self.next) else {
            return Received::Duplicate;
        };
        let offset = usize::try_from(offset).expect("invariant: in-flight changes fit in memory");
        if self.pending.len() <= offset {
            self.pending.resize_with(offset + 1, || None);
        }
        let slot = &mut self.pending[offset];
        if slot.is_some() {
            return Received::Duplicate;
        }
        *slot = Some(item.change);
        if offset >= self.window {
            Received::BeyondWindow
        } else {
            Received::Accepted
        }
    }

    /// Shrinks the buffer to what it holds (a burst of changes arriving out of order grew it).
    pub fn shrink_to_fit(&mut self) {
        self.pending.shrink_to_fit();
    }

    /// The next item in order, if it has arrived.
    pub fn pop_ready(&mut self) -> Option<Sequenced<T>> {
        if !matches!(self.pending.front(), Some(Some(_))) {
            return None;
        }
        let change = self.pending.pop_front().flatten()?;
        let seq = ChangeSeq(self.next);
        self.next += 1;
        Some(Sequenced { seq, change })
    }
}

/// Settings of a [`Replica`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// Settings of the replicated table.
    pub table: TableConfig,
    /// Changes that may arrive ahead of a missing one before the replica reports it (they are
    /// kept all the same). Default 65,536: far more than the changes in flight between shards
    /// in one loop iteration.
    pub reorder_window: usize,
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        Self {
            table: TableConfig::default(),
            reorder_window: 65_536,
        }
    }
}

/// One shard's full copy of the subscription table, kept current by applying the ordered
/// change stream. Matching goes through [`Replica::table_mut`]: no lock, no shared state.
#[derive(Debug, Clone)]
pub struct Replica {
    table: SubscriptionTable,
    order: ReorderBuffer<SubscriptionChange>,
}

impl Default for Replica {
    fn default() -> Self {
        Self::new(ReplicaConfig::default())
    }
}

impl Replica {
    /// An empty replica expecting change 0 first.
    pub fn new(config: ReplicaConfig) -> Self {
        Self {
            table: SubscriptionTable::new(config.table),
            order: ReorderBuffer::new(config.reorder_window),
        }
    }

    /// Takes in one change from the mailbox and applies every change that is now in order,
    /// calling `on_applied` for each (in sequence order). Returns how many were applied.
    /// Duplicates are ignored; a change beyond the reorder window is kept all the same.
    pub fn receive(
        &mut self,
        change: Sequenced<SubscriptionChange>,
        mut on_applied: impl FnMut(ChangeSeq, &SubscriptionChange, ChangeOutcome),
    ) -> usize {
        if self.order.receive(change) == Received::Duplicate {
            return 0;
        }
        let mut applied = 0;
        while let Some(ready) = self.order.pop_ready() {
            let outcome = ready.change.apply_to(&mut self.table);
            on_applied(ready.seq, &ready.change, outcome);
            applied += 1;
        }
        applied
    }

    /// Every change before this one has been applied.
    pub fn next_expected(&self) -> ChangeSeq {
        self.order.next_expected()
    }

    /// Number of changes received ahead of a missing one.
    pub fn waiting(&self) -> usize {
        self.order.waiting()
    }

    /// The table, for matching (matching moves shared-group cursors, hence `&mut`).
    pub fn table_mut(&mut self) -> &mut SubscriptionTable {
        &mut self.table
    }

    /// The table, read-only.
    pub fn table(&self) -> &SubscriptionTable {
        &self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(seq: u64) -> Sequenced<u64> {
        Sequenced {
            seq: ChangeSeq(seq),
            change: seq * 10,
        }
    }

    #[test]
    fn reorders_drops_duplicates_and_reports_the_window() {
        let mut buffer = ReorderBuffer::new(4);
        assert_eq!(buffer.receive(item(2)), Received::Accepted);
        assert_eq!(buffer.receive(item(2)), Received::Duplicate);
        assert_eq!(buffer.pop_ready(), None, "0 and 1 are missing");
        assert_eq!(buffer.receive(item(4)), Received::BeyondWindow, "kept");
        assert_eq!(buffer.receive(item(1)), Received::Accepted);
        assert_eq!(buffer.receive(item(0)), Received::Accepted);
        assert_eq!(buffer.waiting(), 4);
        let order: Vec<_> = std::iter::from_fn(|| buffer.pop_ready()).collect();
        assert_eq!(order, [item(0), item(1), item(2)], "3 is missing");
        assert_eq!(
            buffer.receive(item(1)),
            Received::Duplicate,
            "already applied"
        );
        assert_eq!(buffer.next_expected(), ChangeSeq(3));
        assert_eq!(buffer.receive(item(3)), Received::Accepted);
        let order: Vec<_> = std::iter::from_fn(|| buffer.pop_ready()).collect();
        assert_eq!(
            order,
            [item(3), item(4)],
            "the change beyond the window was not lost"
        );
        assert_eq!(
            buffer.receive(item(6)),
            Received::Accepted,
            "window moved on"
        );
    }

    #[test]
    fn sequencer_counts_from_zero() {
        let sequencer = Sequencer::new();
        assert_eq!(sequencer.next(), ChangeSeq(0));
        assert_eq!(sequencer.next(), ChangeSeq(1));
    }
}
