//! One direction's messages on their way across the bridge: those waiting for a slot in the
//! destination's window, and those sent and not yet acknowledged. The source is acknowledged
//! only once the destination has acknowledged (`complete`), so nothing the source considers
//! delivered is held only here.

use std::collections::{HashMap, VecDeque};

use codec::{PacketId, Publish, QoS};

/// The packet id of the bridge's SUBSCRIBE on each connection; never used for a PUBLISH.
pub(crate) const SUBSCRIBE_ID: u16 = u16::MAX;

/// A message sent to the destination under a packet id and not yet acknowledged by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Forwarded {
    /// The packet id the source sent it under.
    pub(crate) source: PacketId,
    pub(crate) qos: QoS,
}

/// A mapped message waiting for the destination's window, with the source's packet id
/// (`None` for QoS 0).
struct Waiting {
    publish: Publish,
    source: Option<PacketId>,
}

/// One direction (local to remote, or remote to local).
pub(crate) struct Lane {
    waiting: VecDeque<Waiting>,
    inflight: HashMap<PacketId, Forwarded>,
    next_id: PacketId,
    /// Most QoS 1/2 messages unacknowledged by the destination (its Receive Maximum).
    window: usize,
}

impl Lane {
    /// An empty lane for a destination that accepts `window` unacknowledged messages.
    pub(crate) fn new(window: usize) -> Self {
        Self {
            waiting: VecDeque::new(),
            inflight: HashMap::new(),
            next_id: PacketId::new(1).unwrap_or_else(|| unreachable!("1 is not 0")),
            window: window.max(1),
        }
    }

    /// Whether a QoS 2 message the source sent as `source` is already on its way (a
    /// re-sent duplicate must not cross twice).
    pub(crate) fn carries(&self, source: PacketId) -> bool {
        self.inflight.values().any(|f| f.source == source)
            || self.waiting.iter().any(|w| w.source == Some(source))
    }

    /// Queues a message (already in its destination form) behind those waiting: order is kept
    /// across QoS levels.
    pub(crate) fn push(&mut self, publish: Publish, source: Option<PacketId>) {
        self.waiting.push_back(Waiting { publish, source });
    }

    /// The next message that may be sent now, with its destination packet id set (QoS 1/2,
    /// recorded as in flight); `None` when nothing waits or the window is full.
    pub(crate) fn next_to_send(&mut self) -> Option<Publish> {
        let front = self.waiting.front()?;
        if front.publish.qos != QoS::AtMostOnce && self.inflight.len() >= self.window {
            return None;
        }
        let Waiting {
            mut publish,
            source,
        } = self.waiting.pop_front()?;
        if let (Some(source), true) = (source, publish.qos != QoS::AtMostOnce) {
            let id = self.free_id();
            publish.packet_id = Some(id);
            let qos = publish.qos;
            self.inflight.insert(id, Forwarded { source, qos });
        } else {
            publish.qos = QoS::AtMostOnce;
            publish.packet_id = None;
        }
        Some(publish)
    }

    /// The destination acknowledged `id` for good (PUBACK, PUBCOMP, or an error code): what
    /// the source must now be told.
    pub(crate) fn complete(&mut self, id: PacketId) -> Option<Forwarded> {
        self.inflight.remove(&id)
    }

    /// Messages sent or waiting.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inflight.len() + self.waiting.len()
    }

    fn free_id(&mut self) -> PacketId {
        while self.inflight.contains_key(&self.next_id) || self.next_id.get() == SUBSCRIBE_ID {
            self.next_id = self.next_id.next();
        }
        let id = self.next_id;
        self.next_id = id.next();
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use codec::MqttStr;

    fn publish(topic: &'static str, qos: QoS) -> Publish {
        let mut publish = Publish::new(MqttStr::from_static(topic).unwrap(), Bytes::new());
        publish.qos = qos;
        publish
    }

    fn id(n: u16) -> PacketId {
        PacketId::new(n).unwrap()
    }

    #[test]
    fn the_window_bounds_what_is_in_flight_and_order_is_kept() {
        let mut lane = Lane::new(2);
        lane.push(publish("a", QoS::AtLeastOnce), Some(id(10)));
        lane.push(publish("b", QoS::ExactlyOnce), Some(id(11)));
        lane.push(publish("c", QoS::AtLeastOnce), Some(id(12)));
        lane.push(publish("d", QoS::AtMostOnce), None);
        let a = lane.next_to_send().unwrap();
        let b = lane.next_to_send().unwrap();
        assert_eq!((a.topic(), b.topic()), ("a", "b"));
        assert!(lane.next_to_send().is_none(), "the window is full");
        assert!(lane.carries(id(11)) && lane.carries(id(12)) && !lane.carries(id(13)));
        let done = lane.complete(a.packet_id.unwrap()).unwrap();
        assert_eq!(
            done,
            Forwarded {
                source: id(10),
                qos: QoS::AtLeastOnce
            }
        );
        assert_eq!(lane.next_to_send().unwrap().topic(), "c");
        let d = lane.next_to_send().unwrap();
        assert_eq!(
            (d.topic(), d.qos, d.packet_id),
            ("d", QoS::AtMostOnce, None)
        );
        assert_eq!(lane.len(), 2);
    }

    #[test]
    fn ids_in_flight_are_never_reused() {
        let mut lane = Lane::new(10);
        let mut seen = Vec::new();
        for n in 1..=5 {
            lane.push(publish("t", QoS::AtLeastOnce), Some(id(n)));
            seen.push(lane.next_to_send().unwrap().packet_id.unwrap());
        }
        lane.complete(seen[1]);
        lane.next_id = seen[0];
        lane.push(publish("t", QoS::AtLeastOnce), Some(id(6)));
        let again = lane.next_to_send().unwrap().packet_id.unwrap();
        assert_eq!(again, seen[1], "the freed id, not one still in flight");
    }

    #[test]
    fn a_qos0_message_never_waits_for_the_window_when_first() {
        let mut lane = Lane::new(1);
        lane.push(publish("a", QoS::AtLeastOnce), Some(id(1)));
        lane.push(publish("b", QoS::AtMostOnce), None);
        assert!(lane.next_to_send().is_some());
        assert_eq!(lane.next_to_send().unwrap().topic(), "b");
    }
}
