//! The last small PUBLISH frame built, reused while the same message goes to recipients whose
//! frames are byte-identical but for the packet id: a fan-out then costs one copy per
//! subscriber (and, at QoS 1/2, two bytes patched) instead of encoding the header each time.

use std::sync::Arc;

use codec::{PacketId, ProtocolVersion, QoS};

use crate::message::Message;

/// See the module documentation. Holding the message keeps its address from being reused by
/// another message while the entry lives.
#[derive(Default)]
pub(super) struct FrameCache {
    message: Option<Arc<Message>>,
    key: Option<FrameKey>,
    frame: Vec<u8>,
    /// Where the packet id lies in `frame` (QoS 1/2; 0 for QoS 0).
    packet_id_at: usize,
    /// The address of the last message offered (`store`) that was not held: a message is held
    /// from its second frame on, so a message with one recipient (point to point) costs no
    /// copy of its frame and no handle. An address reused by a later message only makes that
    /// message's first frame stored.
    offered: usize,
}

/// What makes two frames of one message identical but for the packet id (given no
/// per-subscriber properties, no DUP flag and no topic alias).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct FrameKey {
    /// The receiving connection's protocol version.
    pub protocol: ProtocolVersion,
    /// The RETAIN flag sent.
    pub retain: bool,
    /// The QoS sent (whether the frame has a packet id).
    pub qos: QoS,
}

/// A cached frame and where its packet id lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CachedFrame<'a> {
    bytes: &'a [u8],
    packet_id_at: usize,
}

impl CachedFrame<'_> {
    /// Its length.
    pub(super) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Appends it to `buf` with `packet_id` (`None` for QoS 0) in place of the cached one.
    pub(super) fn write(&self, packet_id: Option<PacketId>, buf: &mut bytes::BytesMut) {
        let start = buf.len();
        buf.extend_from_slice(self.bytes);
        if let Some(id) = packet_id {
            let at = start + self.packet_id_at;
            buf[at..at + 2].copy_from_slice(&id.get().to_be_bytes());
        }
    }
}

/// Where the packet id of an encoded QoS 1/2 PUBLISH lies: after the fixed header's first
/// byte, its remaining length (1 to 4 bytes) and the topic name (2 bytes of length, then the
/// name). `None` for a frame too short to hold one.
fn packet_id_at(frame: &[u8]) -> Option<usize> {
    let length_bytes = 1 + frame
        .get(1..5)?
        .iter()
        .take_while(|b| **b & 0x80 != 0)
        .count();
    let topic_at = 1 + length_bytes;
    let topic_len = u16::from_be_bytes([*frame.get(topic_at)?, *frame.get(topic_at + 1)?]);
    let at = topic_at + 2 + usize::from(topic_len);
    (at + 2 <= frame.len()).then_some(at)
}

impl FrameCache {
    /// The cached frame of `message` for `key`, if that is the one held.
    pub(super) fn get(&self, message: &Arc<Message>, key: FrameKey) -> Option<CachedFrame<'_>> {
        let held = self.message.as_ref()?;
        let hit = Arc::ptr_eq(held, message) && self.key == Some(key);
        hit.then_some(CachedFrame {
            bytes: &self.frame,
            packet_id_at: self.packet_id_at,
        })
    }

    /// Remembers `frame` as `message`'s frame for `key` from the message's second frame on
    /// (not if it cannot find the packet id of a QoS 1/2 frame).
    pub(super) fn store(&mut self, message: &Arc<Message>, key: FrameKey, frame: &[u8]) {
        let address = Arc::as_ptr(message) as usize;
        let held = self
            .message
            .as_ref()
            .is_some_and(|m| Arc::ptr_eq(m, message));
        if !held && std::mem::replace(&mut self.offered, address) != address {
            return;
        }
        let packet_id_at = match key.qos {
            QoS::AtMostOnce => 0,
            _ => match packet_id_at(frame) {
                Some(at) => at,
                None => return self.clear(),
            },
        };
        if !self
            .message
            .as_ref()
            .is_some_and(|m| Arc::ptr_eq(m, message))
        {
            self.message = Some(Arc::clone(message));
        }
        self.key = Some(key);
        self.packet_id_at = packet_id_at;
        self.frame.clear();
        self.frame.extend_from_slice(frame);
    }

    /// Lets the held message go (at the end of a turn, so a cached message is not kept alive).
    pub(super) fn clear(&mut self) {
        self.message = None;
        self.offered = 0;
    }
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use codec::{FrameOptions, MqttStr, PublishProperties, SharedPublish};

    use super::*;

    fn message(payload: &'static [u8]) -> Arc<Message> {
        message_on(b"a/b", payload)
    }

    fn message_on(topic: &'static [u8], payload: &'static [u8]) -> Arc<Message> {
        let topic = MqttStr::from_bytes(Bytes::from_static(topic)).expect("valid topic");
        let publish = SharedPublish::new(
            topic,
            Bytes::from_static(payload),
            &PublishProperties::default(),
        )
        .expect("valid message");
        Arc::new(Message {
            publish,
            qos: QoS::AtMostOnce,
            retain: false,
            expires_at: None,
            received_ns: 0,
            key: 0,
        })
    }

    const V4: FrameKey = FrameKey {
        protocol: ProtocolVersion::V3_1_1,
        retain: false,
        qos: QoS::AtMostOnce,
    };

    fn bytes_of(frame: Option<CachedFrame<'_>>) -> Option<&[u8]> {
        frame.map(|f| f.bytes)
    }

    #[test]
    fn hits_only_for_the_same_message_and_key() {
        let mut cache = FrameCache::default();
        let (first, second) = (message(b"one"), message(b"two"));
        assert_eq!(cache.get(&first, V4), None);
        cache.store(&first, V4, b"frame-1");
        assert_eq!(
            cache.get(&first, V4),
            None,
            "a message's first frame is not kept"
        );
        cache.store(&first, V4, b"frame-1");
        assert_eq!(bytes_of(cache.get(&first, V4)), Some(&b"frame-1"[..]));
        assert_eq!(cache.get(&second, V4), None, "another message");
        let retained = FrameKey { retain: true, ..V4 };
        assert_eq!(cache.get(&first, retained), None, "another RETAIN flag");
        let v5 = FrameKey {
            protocol: ProtocolVersion::V5,
            ..V4
        };
        assert_eq!(cache.get(&first, v5), None, "another protocol");
        let qos1 = FrameKey {
            qos: QoS::AtLeastOnce,
            ..V4
        };
        assert_eq!(cache.get(&first, qos1), None, "another QoS");
        cache.store(&second, V4, b"frame-2");
        cache.store(&second, V4, b"frame-2");
        assert_eq!(cache.get(&first, V4), None);
        assert_eq!(bytes_of(cache.get(&second, V4)), Some(&b"frame-2"[..]));
    }

    fn encoded(message: &Message, key: FrameKey, id: u16) -> BytesMut {
        let mut options = FrameOptions::new(key.protocol);
        options.qos = key.qos;
        options.retain = key.retain;
        options.packet_id = PacketId::new(id);
        let mut buf = BytesMut::new();
        (message.publish.write_frame(&options, &mut buf)).expect("encodes");
        buf
    }

    /// A cached QoS 1/2 frame written with another packet id is the frame encoded with it, on
    /// both protocols and with a remaining length of one byte and of two.
    #[test]
    fn a_cached_frame_takes_each_recipients_packet_id() {
        let long_topic: &'static [u8] = &[b'x'; 200];
        for topic in [&b"a/b"[..], long_topic] {
            for protocol in [ProtocolVersion::V3_1_1, ProtocolVersion::V5] {
                for qos in [QoS::AtLeastOnce, QoS::ExactlyOnce] {
                    let held = message_on(topic, b"payload");
                    let key = FrameKey {
                        protocol,
                        retain: true,
                        qos,
                    };
                    let mut cache = FrameCache::default();
                    cache.store(&held, key, &encoded(&held, key, 6));
                    cache.store(&held, key, &encoded(&held, key, 7));
                    let cached = cache.get(&held, key).expect("cached");
                    let mut buf = BytesMut::from(&b"before"[..]);
                    cached.write(PacketId::new(0x1234), &mut buf);
                    assert_eq!(&buf[..6], b"before");
                    assert_eq!(buf[6..], encoded(&held, key, 0x1234)[..]);
                }
            }
        }
    }

    #[test]
    fn clearing_lets_the_message_go() {
        let mut cache = FrameCache::default();
        let held = message(b"one");
        cache.store(&held, V4, b"frame");
        assert_eq!(Arc::strong_count(&held), 1, "one frame: no handle kept");
        cache.store(&held, V4, b"frame");
        assert_eq!(Arc::strong_count(&held), 2);
        cache.clear();
        assert_eq!(Arc::strong_count(&held), 1);
        assert_eq!(cache.get(&held, V4), None);
    }
}
