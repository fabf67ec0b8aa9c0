//! The in-memory index a durable engine keeps of what it stores, so that a batch turns into
//! key writes without reading sessions back: per session, its record (connection-scoped state,
//! subscriptions, inbound QoS 2 ids), its queue's length and last sequence number, and its
//! inflight entries' send order and phase. Never a queued message or a per-message queue
//! entry: memory does not grow with queued messages.

use std::collections::HashMap;

use codec::{MqttStr, PacketId};

use super::overlay::PlannedAt;
use crate::storage::{MessageSeq, StoredSession};

/// Where an inflight entry stands (its message, if any, is in the store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::storage) enum Phase {
    /// QoS 1, awaiting PUBACK.
    Ack,
    /// QoS 2, awaiting PUBREC.
    Rec,
    /// QoS 2 released, awaiting PUBCOMP.
    Comp,
}

/// An inflight entry as the index keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::storage) struct Flight {
    /// Its place in send order (engine-wide, increasing).
    pub(in crate::storage) send: u64,
    /// Its phase.
    pub(in crate::storage) phase: Phase,
    /// Where the batch being planned wrote its key, if it did.
    pub(in crate::storage) planned: PlannedAt,
}

/// The highest queued sequence number of a session, as far as the index knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::storage) enum LastQueued {
    /// The queue is empty.
    Empty,
    /// The queue's last message has this sequence number.
    Seq(MessageSeq),
    /// The queue is not empty but its last message was removed: read the store to know.
    Unknown,
}

/// One stored session as the index keeps it.
#[derive(Debug, Clone)]
pub(in crate::storage) struct Indexed {
    /// The session's record (its `queued` and `inflight` always empty).
    pub(in crate::storage) record: StoredSession,
    /// How many messages its queue holds.
    pub(in crate::storage) queued: u64,
    /// Its queue's last sequence number.
    pub(in crate::storage) last_queued: LastQueued,
    /// Its inflight entries by packet id.
    pub(in crate::storage) inflight: HashMap<PacketId, Flight, foldhash::fast::RandomState>,
    /// Whether the store holds its inbound QoS 2 ids' key.
    pub(in crate::storage) awaiting_stored: bool,
    /// Whether the batch being planned changed its inbound QoS 2 ids (they are written once,
    /// at the batch's end).
    pub(in crate::storage) awaiting_changed: bool,
    /// Inbound QoS 2 ids the store holds under keys of the older layout, one per id: deleted
    /// when the session's ids are next written.
    pub(in crate::storage) legacy_awaiting: Vec<PacketId>,
}

impl Indexed {
    /// A session with only a record.
    pub(in crate::storage) fn new(record: StoredSession) -> Self {
        Self {
            record,
            queued: 0,
            last_queued: LastQueued::Empty,
            inflight: HashMap::default(),
            awaiting_stored: false,
            awaiting_changed: false,
            legacy_awaiting: Vec::new(),
        }
    }

    /// Counts a message queued with `seq` (above every queued one).
    pub(in crate::storage) fn push_queued(&mut self, seq: MessageSeq) {
        self.queued += 1;
        self.last_queued = LastQueued::Seq(seq);
    }

    /// Counts a queued message `seq` gone (dropped or sent).
    pub(in crate::storage) fn remove_queued(&mut self, seq: MessageSeq) {
        self.queued = self.queued.saturating_sub(1);
        if self.queued == 0 {
            self.last_queued = LastQueued::Empty;
        } else if self.last_queued == LastQueued::Seq(seq) {
            self.last_queued = LastQueued::Unknown;
        }
    }
}

/// Every stored session by client identifier, and the next inflight send number.
#[derive(Debug, Default)]
pub(in crate::storage) struct Index {
    /// The sessions.
    pub(in crate::storage) sessions: HashMap<MqttStr, Indexed, foldhash::fast::RandomState>,
    /// The send number the next inflight entry gets (above every stored one).
    pub(in crate::storage) next_send: u64,
}
