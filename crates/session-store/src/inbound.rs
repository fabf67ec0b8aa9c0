//! Inbound QoS 2 state: packet ids whose PUBLISH was received and forwarded but whose PUBREL has
//! not arrived. A repeated PUBLISH with such an id is acknowledged again but not forwarded again.

use codec::PacketId;

use crate::lazy::LazyDeque;

/// The outcome of recording an inbound QoS 2 PUBLISH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboundQos2 {
    /// First time: forward the message, then answer PUBREC.
    New,
    /// A duplicate of a message already forwarded: answer PUBREC only.
    Duplicate,
    /// More unreleased QoS 2 messages than our Receive Maximum allows (0x93).
    OverLimit,
}

/// Packet ids awaiting PUBREL, bounded by our Receive Maximum. Clients release promptly, so
/// the list is short and a scan beats a hash set in time and memory.
#[derive(Debug, Default)]
pub struct AwaitingRelease {
    ids: LazyDeque<PacketId>,
}

impl AwaitingRelease {
    /// Records a received QoS 2 PUBLISH; `limit` is our Receive Maximum.
    pub fn record(&mut self, id: PacketId, limit: usize) -> InboundQos2 {
        if self.ids.position(|known| *known == id).is_some() {
            return InboundQos2::Duplicate;
        }
        if self.ids.len() >= limit {
            return InboundQos2::OverLimit;
        }
        self.ids.push_back(id);
        InboundQos2::New
    }

    /// PUBREL received: releases the id. Returns whether it was known (PUBCOMP reason 0x92
    /// Packet Identifier Not Found otherwise).
    pub fn release(&mut self, id: PacketId) -> bool {
        match self.ids.position(|known| *known == id) {
            Some(at) => self.ids.remove(at).is_some(),
            None => false,
        }
    }

    /// The ids awaiting release, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = PacketId> + '_ {
        self.ids.iter().copied()
    }

    /// Ids awaiting release.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether none await release.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_publish_is_not_forwarded_twice() {
        let id = PacketId::new(7).unwrap();
        let mut a = AwaitingRelease::default();
        assert_eq!(a.record(id, 10), InboundQos2::New);
        assert_eq!(a.record(id, 10), InboundQos2::Duplicate);
        assert!(a.release(id));
        assert!(!a.release(id));
        assert_eq!(
            a.record(id, 10),
            InboundQos2::New,
            "after PUBREL the id is new again"
        );
    }

    #[test]
    fn limit_is_enforced() {
        let mut a = AwaitingRelease::default();
        assert_eq!(a.record(PacketId::new(1).unwrap(), 1), InboundQos2::New);
        assert_eq!(
            a.record(PacketId::new(2).unwrap(), 1),
            InboundQos2::OverLimit
        );
    }
}
