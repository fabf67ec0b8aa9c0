//! The outbound inflight window of one session: QoS 1/2 messages sent and not yet acknowledged.
//!
//! Packet identifiers are allocated here, never reused while in flight, and entries keep their
//! send order so a resumed session resends them in the order they were first sent.

use std::collections::VecDeque;

use crate::lazy::LazyDeque;

use codec::{PacketId, QoS};

/// Where an outbound QoS 1/2 message stands in its acknowledgement flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InflightState<M> {
    /// QoS 1 sent, waiting for PUBACK.
    AwaitingPubAck(M),
    /// QoS 2 sent, waiting for PUBREC.
    AwaitingPubRec(M),
    /// QoS 2 PUBREC received and PUBREL sent, waiting for PUBCOMP; the message itself is released.
    AwaitingPubComp,
}

impl<M> InflightState<M> {
    /// The same state with its message borrowed.
    pub fn as_ref(&self) -> InflightState<&M> {
        match self {
            Self::AwaitingPubAck(message) => InflightState::AwaitingPubAck(message),
            Self::AwaitingPubRec(message) => InflightState::AwaitingPubRec(message),
            Self::AwaitingPubComp => InflightState::AwaitingPubComp,
        }
    }

    /// Its message, while it holds one (not once PUBREC released it).
    pub fn message(&self) -> Option<&M> {
        match self {
            Self::AwaitingPubAck(message) | Self::AwaitingPubRec(message) => Some(message),
            Self::AwaitingPubComp => None,
        }
    }

    /// The same state with its message mapped by `f`.
    pub fn map<N>(self, f: impl FnOnce(M) -> N) -> InflightState<N> {
        match self {
            Self::AwaitingPubAck(message) => InflightState::AwaitingPubAck(f(message)),
            Self::AwaitingPubRec(message) => InflightState::AwaitingPubRec(f(message)),
            Self::AwaitingPubComp => InflightState::AwaitingPubComp,
        }
    }
}

/// Why an acknowledgement was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// No message is in flight with this packet id.
    #[error("no message in flight with packet id {0}")]
    UnknownPacketId(PacketId),
    /// The acknowledgement does not fit the message's flow (e.g. PUBACK for a QoS 2 message).
    #[error("acknowledgement out of order for packet id {0}")]
    WrongState(PacketId),
}

/// One message in flight.
#[derive(Debug)]
struct Entry<M> {
    id: PacketId,
    /// Sent (or re-sent) on the current connection: it counts against the client's Receive
    /// Maximum. A resumed session's entries are unsent until there is room to re-send them.
    sent: bool,
    state: InflightState<M>,
}

/// The outbound inflight window, bounded by `capacity` (the client's Receive Maximum, or ours).
///
/// Entries are kept in send order in one `VecDeque`: acknowledgements usually come in order, so
/// the entry is found at the front, and a resumed session resends in that same order. The window
/// is small (bounded by a Receive Maximum), so lookups by id are short scans.
#[derive(Debug)]
pub struct InflightWindow<M> {
    entries: LazyDeque<Entry<M>>,
    capacity: u16,
    next_id: PacketId,
    /// Entries not yet sent on the current connection (0 but for a resumed session with more
    /// in flight than its new Receive Maximum): acknowledgements skip the re-send scan when 0.
    unsent: u16,
    /// `Some` while every id in the window was handed out by [`Self::free_id`] without
    /// skipping one in use since the window was last empty: ids then rise (wrapping after
    /// 65,535) from the front to the back, none of them handed out before this bound (the
    /// first id handed out since the window was last empty, or the one after the last front
    /// removed), and the next id is known free without reading an entry (see `free_id`).
    /// `None` once an id was skipped, until the window empties. (One field for both keeps a
    /// session within its 128 bytes.)
    consecutive_from: Option<PacketId>,
}

impl<M> InflightWindow<M> {
    /// An empty window holding at most `capacity` (at least 1) messages.
    pub fn new(capacity: u16) -> Self {
        Self {
            entries: LazyDeque::default(),
            capacity: capacity.max(1),
            unsent: 0,
            next_id: PacketId::new(1).expect("invariant: 1 is non-zero"),
            consecutive_from: PacketId::new(1),
        }
    }

    /// Most messages in flight at once.
    pub fn capacity(&self) -> usize {
        usize::from(self.capacity)
    }

    /// Changes the bound (e.g. to a reconnecting client's new Receive Maximum). Entries already in
    /// flight stay; no new ones are admitted until the window is below the new bound.
    pub fn set_capacity(&mut self, capacity: u16) {
        self.capacity = capacity.max(1);
    }

    /// Messages in flight.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether entries wait to be sent again on the current connection (see
    /// [`Self::take_resends`]).
    pub fn owes_resends(&self) -> bool {
        self.unsent != 0
    }

    /// Whether a new message can be admitted.
    pub fn has_room(&self) -> bool {
        self.entries.len() < self.capacity()
    }

    /// Whether messages waiting in a queue should fill the window now: once half of it (at
    /// least one slot) is free. A client that falls behind keeps the window full; refilled a
    /// slot per acknowledgement, it would get one small write per acknowledgement (a window
    /// that opens by a few bytes at a time, as TCP's silly window syndrome); refilled by
    /// halves, it gets half a window per write while the other half is still its to read.
    pub fn refill_due(&self) -> bool {
        let capacity = self.capacity();
        self.entries.len() <= capacity - capacity.div_ceil(2)
    }

    fn position(&self, id: PacketId) -> Option<usize> {
        self.entries.position(|e| e.id == id)
    }

    /// Removes entry `at`; an emptied window gives its buffer back (an idle session holds none).
    fn remove_at(&mut self, at: usize) -> Option<InflightState<M>> {
        let entry = self.entries.remove(at)?;
        if at == 0 && self.consecutive_from.is_some() {
            self.consecutive_from = Some(entry.id.next());
        }
        if !entry.sent {
            self.unsent -= 1;
        }
        if self.entries.is_empty() {
            self.consecutive_from = Some(self.next_id);
        }
        Some(entry.state)
    }

    fn state(&self, at: usize) -> Option<&InflightState<M>> {
        self.entries.get(at).map(|e| &e.state)
    }

    /// Admits a QoS 1 or 2 message and returns the packet id it must be sent with, or gives the
    /// message back when the window is full. QoS 0 messages never enter the window.
    pub fn admit(&mut self, qos: QoS, message: M) -> Result<PacketId, M> {
        if !self.has_room() {
            return Err(message);
        }
        let state = match qos {
            QoS::AtMostOnce => return Err(message),
            QoS::AtLeastOnce => InflightState::AwaitingPubAck(message),
            QoS::ExactlyOnce => InflightState::AwaitingPubRec(message),
        };
        let id = self.free_id();
        if self.entries.is_empty() {
            self.consecutive_from = Some(id);
        }
        self.entries.push_back(Entry {
            id,
            sent: true,
            state,
        });
        Ok(id)
    }

    /// The next packet id not in flight. The window never holds 65,535 entries (its capacity is a
    /// u16 Receive Maximum and ids are freed on completion), so the scan ends. While the ids in
    /// flight are consecutive hand-outs, `next_id` lies past the newest of them; it is in use
    /// only once the count has come round to the oldest, which the scan then finds and skips
    /// (and the window stops counting on order until it empties).
    fn free_id(&mut self) -> PacketId {
        let id = self.next_packet_id();
        if id != self.next_id {
            // An id in use was skipped: the window's ids are no longer consecutive hand-outs.
            self.consecutive_from = None;
        }
        self.next_id = id.next();
        id
    }

    /// The packet id the next [`Self::admit`] hands out (a copy can be sent under it before it
    /// is moved into the window, as long as the window does not change in between).
    pub fn next_packet_id(&self) -> PacketId {
        let mut id = self.next_id;
        if !self.next_id_known_free() {
            while self.position(id).is_some() {
                id = id.next();
            }
        }
        id
    }

    /// Whether `next_id` is certainly not in flight, without scanning: the window is empty,
    /// or its ids are consecutive hand-outs, all within `consecutive_from..next_id` going
    /// round, and the count has not come round to `consecutive_from` again.
    fn next_id_known_free(&self) -> bool {
        self.entries.is_empty()
            || self
                .consecutive_from
                .is_some_and(|from| from != self.next_id)
    }

    /// PUBACK for a QoS 1 message: completes it and returns it.
    pub fn on_puback(&mut self, id: PacketId) -> Result<M, AckError> {
        let at = self.position(id).ok_or(AckError::UnknownPacketId(id))?;
        if !matches!(self.state(at), Some(InflightState::AwaitingPubAck(_))) {
            return Err(AckError::WrongState(id));
        }
        match self.remove_at(at) {
            Some(InflightState::AwaitingPubAck(m)) => Ok(m),
            _ => Err(AckError::WrongState(id)),
        }
    }

    /// PUBREC for a QoS 2 message: the message is released (returned) and PUBREL is now owed.
    /// A repeated PUBREC for a message already awaiting PUBCOMP is accepted (PUBREL is resent).
    pub fn on_pubrec(&mut self, id: PacketId) -> Result<Option<M>, AckError> {
        let at = self.position(id).ok_or(AckError::UnknownPacketId(id))?;
        let state = &mut self
            .entries
            .get_mut(at)
            .expect("invariant: position() found this entry")
            .state;
        match std::mem::replace(state, InflightState::AwaitingPubComp) {
            InflightState::AwaitingPubRec(m) => Ok(Some(m)),
            InflightState::AwaitingPubComp => Ok(None),
            other @ InflightState::AwaitingPubAck(_) => {
                *state = other;
                Err(AckError::WrongState(id))
            }
        }
    }

    /// PUBCOMP for a QoS 2 message: completes its flow.
    pub fn on_pubcomp(&mut self, id: PacketId) -> Result<(), AckError> {
        let at = self.position(id).ok_or(AckError::UnknownPacketId(id))?;
        if !matches!(self.state(at), Some(InflightState::AwaitingPubComp)) {
            return Err(AckError::WrongState(id));
        }
        self.remove_at(at);
        Ok(())
    }

    /// A PUBREC with an error reason code ends a QoS 2 flow early: the message is dropped.
    pub fn abandon(&mut self, id: PacketId) -> Option<InflightState<M>> {
        let at = self.position(id)?;
        self.remove_at(at)
    }

    /// The entries in send order, with their packet ids (to store or move the session).
    pub fn iter(&self) -> impl Iterator<Item = (PacketId, &InflightState<M>)> {
        self.entries.iter().map(|entry| (entry.id, &entry.state))
    }

    /// Puts back an entry a restart found in flight under `id`, behind those restored before it
    /// (in their original send order), unsent: the resumed connection re-sends it. Packet ids
    /// allocated later skip it.
    pub fn restore(&mut self, id: PacketId, state: InflightState<M>) {
        if self.position(id).is_some() {
            return;
        }
        self.entries.push_back(Entry {
            id,
            sent: false,
            state,
        });
        self.unsent += 1;
        self.next_id = id.next();
        // Restored in send order, but not necessarily handed out consecutively.
        self.consecutive_from = None;
    }

    /// A new connection took the session over: nothing in flight has been sent on it yet.
    pub fn mark_all_unsent(&mut self) {
        for entry in self.entries.iter_mut() {
            entry.sent = false;
        }
        self.unsent = self.len_u16();
    }

    /// Entries in the window (at most its capacity plus a resumed session's excess, so a u16).
    fn len_u16(&self) -> u16 {
        u16::try_from(self.entries.len()).expect("invariant: packet ids bound the window")
    }

    /// The entries to send again now, in original send order, marked sent: as many as the
    /// window's capacity leaves room for next to those already sent on this connection (MQTT
    /// 5.0 3.3.4: never more unacknowledged QoS 1/2 PUBLISH packets than the Receive Maximum).
    pub fn take_resends(&mut self) -> Vec<(PacketId, Option<M>)>
    where
        M: Clone,
    {
        if self.unsent == 0 {
            return Vec::new();
        }
        let in_flight = self.entries.len() - usize::from(self.unsent);
        let room = self.capacity().saturating_sub(in_flight);
        let mut due = Vec::new();
        for entry in self.entries.iter_mut().filter(|e| !e.sent).take(room) {
            entry.sent = true;
            self.unsent -= 1;
            let message = match &entry.state {
                InflightState::AwaitingPubAck(m) | InflightState::AwaitingPubRec(m) => {
                    Some(m.clone())
                }
                InflightState::AwaitingPubComp => None,
            };
            due.push((entry.id, message));
        }
        due
    }

    /// Removes and returns, in send order with their packet ids, the QoS 1 messages awaiting
    /// PUBACK for which `take` is true. QoS 2 flows stay: a QoS 2 message in flight must
    /// complete with this session.
    pub fn take_qos1_where(&mut self, mut take: impl FnMut(&M) -> bool) -> Vec<(PacketId, M)> {
        let mut taken = Vec::new();
        let mut kept = VecDeque::new();
        for entry in self.entries.take_all() {
            match entry.state {
                InflightState::AwaitingPubAck(m) if take(&m) => taken.push((entry.id, m)),
                state => kept.push_back(Entry {
                    id: entry.id,
                    sent: entry.sent,
                    state,
                }),
            }
        }
        self.unsent = u16::try_from(kept.iter().filter(|e| !e.sent).count())
            .expect("invariant: packet ids bound the window");
        self.entries.restore(kept);
        taken
    }

    /// Removes and returns every message still unacknowledged (PUBREL-owed entries carry none),
    /// in send order.
    pub fn drain_messages(&mut self) -> Vec<(QoS, M)> {
        self.unsent = 0;
        self.consecutive_from = Some(self.next_id);
        self.entries
            .take_all()
            .into_iter()
            .filter_map(|entry| match entry.state {
                InflightState::AwaitingPubAck(m) => Some((QoS::AtLeastOnce, m)),
                InflightState::AwaitingPubRec(m) => Some((QoS::ExactlyOnce, m)),
                InflightState::AwaitingPubComp => None,
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "inflight_tests.rs"]
mod tests;
