//! [`KeptPublishes`]: with `runtime.subscribe_order = "received"`, the messages a shard routed
//! at once although a SUBSCRIBE that may have reached the broker before them had not reached
//! its replica yet: another shard had not handled all it had received (its fence had not
//! passed) or this replica had not applied every change stamped before them. Each is kept
//! until both hold; a new subscription applied meanwhile that may precede it gets its copy then
//! (`publish_order.rs` keeps and re-matches, `changes.rs` asks at each change).
//!
//! A change may precede a kept message when it was stamped before the message was handled
//! (below its horizon), or when another shard took the SUBSCRIBE with an input stamp under the
//! mark the message's fence took on that shard ([`ring_runtime::FenceMarks::may_precede`]).

use std::collections::VecDeque;
use std::sync::Arc;

use codec::{QoS, SubscriptionId, SubscriptionOptions};
use ring_runtime::{FenceMarks, InputFence};
use router::{
    ChangeSeq, SharedFilter, SubscriberId, SubscriptionFilter, SubscriptionTable, TopicName,
};

use crate::message::{ChangeSource, Message};

/// What keeping a message costs besides its topic, payload and properties: its entry, and the
/// shared record it may keep alive (the `Arc<Message>` allocation with its two counters).
const KEPT_MESSAGE_BYTES: usize = std::mem::size_of::<KeptMessage>()
    + std::mem::size_of::<Message>()
    + 2 * std::mem::size_of::<usize>();

/// Most messages in one group: a turn's messages beyond go to another group, so no group's
/// list grows past 1,024 entries (about 56 KiB) however long a turn (bounded allocations; no
/// change in throughput or page faults was measured: docs/bench/history/issue-49-order.md).
const GROUP_MESSAGES: usize = 1024;

/// What a turn's PUBLISH packets were routed against: their fence, what it marked on the other
/// shards (`None` once passed: no other shard held anything unhandled) and the horizon.
#[derive(Clone, Debug)]
pub(super) struct RoutedAgainst {
    pub(super) fence: InputFence,
    pub(super) marks: Option<FenceMarks>,
    pub(super) horizon: ChangeSeq,
}

/// A routed message kept for subscriptions that may precede it.
pub(super) struct KeptMessage {
    pub(super) topic: TopicName,
    pub(super) message: Arc<Message>,
    /// The publishing session (no-local).
    pub(super) publisher: Option<SubscriberId>,
}

/// Messages routed against the same fence and horizon.
struct KeptGroup {
    against: RoutedAgainst,
    /// What its messages hold: entries, topics and payloads, and the receive buffers that
    /// QoS 0 messages borrow (each counted once per group).
    bytes: usize,
    /// Read once the fence has passed: the changes stamped by then cover every SUBSCRIBE the
    /// fence waited for; once applied, nothing can precede these messages any more.
    retire_at: Option<ChangeSeq>,
    messages: Vec<KeptMessage>,
}

/// A copy owed to a subscription that may precede a kept message.
pub(super) struct Rematch {
    pub(super) subscriber: SubscriberId,
    pub(super) message: Arc<Message>,
    pub(super) qos: QoS,
    pub(super) retain: bool,
    pub(super) id: Option<SubscriptionId>,
    pub(super) shared: Option<SharedFilter>,
}

/// A new subscription, as a change carries it.
pub(super) struct NewSubscription<'a> {
    pub(super) subscriber: SubscriberId,
    pub(super) filter: &'a SubscriptionFilter,
    pub(super) options: SubscriptionOptions,
    pub(super) id: Option<SubscriptionId>,
}

/// The kept messages, oldest group first, and the group being recorded, bounded in bytes
/// (`runtime.subscribe_order_keep_bytes`): a PUBLISH beyond waits instead (held, as with
/// `"handled"`'s horizon).
pub(super) struct KeptPublishes {
    groups: VecDeque<KeptGroup>,
    bytes: usize,
    limit: usize,
    /// Set while a PUBLISH routed at once is handled: what its routed messages are kept with.
    recording: Option<RoutedAgainst>,
    /// The receive buffer being decoded: its size, and whether the newest group counts it.
    read: ReadBuffer,
}

/// The receive buffer whose packets are being handled.
#[derive(Default)]
struct ReadBuffer {
    capacity: usize,
    counted: bool,
}

impl KeptPublishes {
    /// An empty book that keeps at most `limit` bytes.
    pub(super) fn new(limit: usize) -> Self {
        Self {
            groups: VecDeque::new(),
            bytes: 0,
            limit,
            recording: None,
            read: ReadBuffer::default(),
        }
    }

    /// Whether another message may be kept.
    pub(super) fn has_room(&self) -> bool {
        self.bytes < self.limit
    }

    /// The packets handled next come from a receive buffer of `capacity` bytes (a QoS 0
    /// message kept borrows it whole).
    pub(super) fn reading(&mut self, capacity: usize) {
        self.read = ReadBuffer {
            capacity,
            counted: false,
        };
    }

    /// Whether nothing is kept.
    pub(super) fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// From now until [`Self::stop_recording`], routed messages are kept with `against`.
    pub(super) fn record(&mut self, against: RoutedAgainst) {
        self.recording = Some(against);
    }

    /// Ends [`Self::record`].
    pub(super) fn stop_recording(&mut self) {
        self.recording = None;
    }

    /// Keeps `kept` if a PUBLISH is being recorded.
    pub(super) fn keep_if_recording(&mut self, kept: impl FnOnce() -> KeptMessage) {
        let Some(against) = &self.recording else {
            return;
        };
        let same = self.groups.back().is_some_and(|group| {
            group.against.fence == against.fence
                && group.against.horizon == against.horizon
                && group.messages.len() < GROUP_MESSAGES
        });
        if !same {
            self.groups.push_back(KeptGroup {
                against: against.clone(),
                bytes: 0,
                retire_at: None,
                messages: Vec::new(),
            });
            self.read.counted = false;
        }
        let kept = kept();
        let publish = &kept.message.publish;
        let mut bytes = KEPT_MESSAGE_BYTES
            + kept.topic.as_str().len()
            + publish.payload().len()
            + publish.shared_properties().len();
        if kept.message.qos == QoS::AtMostOnce && !self.read.counted {
            bytes += self.read.capacity;
            self.read.counted = true;
        }
        if let Some(group) = self.groups.back_mut() {
            group.messages.push(kept);
            group.bytes += bytes;
            self.bytes += bytes;
        }
    }

    /// Lets go of the groups nothing can precede any more, oldest first: their fence passed
    /// and this replica applied (up to, not including, `applied`) every change stamped by then
    /// (`horizon`, read when the fence is seen passed).
    pub(super) fn retire(
        &mut self,
        applied: ChangeSeq,
        passed: impl Fn(InputFence) -> bool,
        horizon: impl Fn() -> ChangeSeq,
    ) {
        while let Some(group) = self.groups.front_mut() {
            if group.retire_at.is_none() && passed(group.against.fence) {
                group.retire_at = Some(horizon().max(group.against.horizon));
            }
            match group.retire_at {
                Some(due) if due <= applied => {
                    self.bytes -= group.bytes;
                    self.groups.pop_front();
                }
                _ => break,
            }
        }
    }

    /// The copies a new subscription stamped `seq` from `source` owes kept messages it may
    /// precede, decided against `table` before the subscription is added to it: none where the
    /// subscriber already had it, or another subscription that reached the message, or (for a
    /// shared one) where the group already had a member, which got the message, or where
    /// `groups_here` says another place chose the group's member for the message's topic.
    pub(super) fn owed_to(
        &self,
        new: &NewSubscription<'_>,
        (seq, source): (ChangeSeq, ChangeSource),
        table: &mut SubscriptionTable,
        groups_here: impl Fn(&TopicName) -> bool,
    ) -> Vec<Rematch> {
        let mut owed = Vec::new();
        if self.groups.is_empty() || table.subscription(new.subscriber, new.filter).is_some() {
            return owed;
        }
        let shared = match new.filter {
            SubscriptionFilter::Shared(group) if table.group_members(group).next().is_some() => {
                return owed;
            }
            SubscriptionFilter::Shared(group) => Some(group),
            SubscriptionFilter::Plain(_) => None,
        };
        let filter = new.filter.topic_filter();
        let preceded = self.groups.iter().filter(|group| {
            seq < group.against.horizon
                || (group.against.marks.as_ref())
                    .is_some_and(|marks| marks.may_precede(source.shard, source.input))
        });
        for kept in preceded.flat_map(|group| group.messages.iter()) {
            let own = kept.publisher == Some(new.subscriber);
            if !filter.matches(&kept.topic) || (own && new.options.no_local) {
                continue;
            }
            let reached = match shared {
                None => table.reaches(&kept.topic, new.subscriber, kept.publisher),
                Some(_) => !groups_here(&kept.topic),
            };
            if reached {
                continue;
            }
            owed.push(Rematch {
                subscriber: new.subscriber,
                message: Arc::clone(&kept.message),
                qos: kept.message.qos.min(new.options.qos),
                retain: kept.message.retain && new.options.retain_as_published,
                id: new.id,
                shared: shared.cloned(),
            });
        }
        owed
    }
}

#[cfg(test)]
#[path = "order_kept_tests.rs"]
mod tests;
