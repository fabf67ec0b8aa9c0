//! What the shard keeps for the delivery journal (`journal.rs` writes and releases it): the
//! turn's steps, the connections holding their packets, and the keys of new messages.

use std::collections::VecDeque;
use std::time::Instant;

use super::FastMap;
use crate::shared_parts::Links;
use broker_api::cluster::JournalEntry;
use ring_runtime::ConnId;

/// The keys this shard gives the messages its clients publish in a cluster: consecutive from a
/// random start, so keys drawn by different shards and nodes do not meet (2^64 values).
#[derive(Debug, Default)]
pub(super) struct MessageKeys {
    next: u64,
}

impl MessageKeys {
    /// The next key (never 0: no key), or 0 on a single node.
    pub(super) fn next(&mut self, links: &Links) -> u64 {
        if links.cluster.is_none() {
            return 0;
        }
        if self.next == 0 {
            self.next = random_start();
        }
        let key = self.next;
        self.next = self.next.wrapping_add(1).max(1);
        key
    }
}

fn random_start() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    let at = std::time::SystemTime::now();
    RandomState::new().hash_one((at, std::thread::current().id())) | 1
}

/// This shard's journal steps of the turn and the connections waiting for earlier ones.
#[derive(Debug, Default)]
pub(super) struct Journal {
    /// Steps of this turn, handed over at its end.
    pub(super) entries: Vec<JournalEntry>,
    /// Completed steps not handed over yet, and since when the first has waited.
    pub(super) completions: Vec<JournalEntry>,
    pub(super) completions_since: Option<Instant>,
    /// Connections holding this turn's steps' packets.
    pub(super) held_now: Vec<ConnId>,
    /// The last number handed over.
    pub(super) last: u64,
    /// Numbers handed over and not yet settled, with their connections, in order.
    pub(super) waiting: VecDeque<(u64, Vec<ConnId>)>,
    /// Each held connection's latest number: it writes again once that one settles.
    pub(super) held: FastMap<ConnId, u64>,
}
