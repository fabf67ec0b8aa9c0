//! The last small QoS 0 PUBLISH frame built, reused while the same message goes to recipients
//! whose frames are byte-identical: a fan-out then costs one copy per subscriber instead of
//! encoding the header each time.

use std::sync::Arc;

use codec::ProtocolVersion;

use crate::message::Message;

/// See the module documentation. Holding the message keeps its address from being reused by
/// another message while the entry lives.
#[derive(Default)]
pub(super) struct FrameCache {
    message: Option<Arc<Message>>,
    protocol: Option<ProtocolVersion>,
    retain: bool,
    frame: Vec<u8>,
}

/// What makes two QoS 0 frames of one message identical (given no per-subscriber properties).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct FrameKey {
    /// The receiving connection's protocol version.
    pub protocol: ProtocolVersion,
    /// The RETAIN flag sent.
    pub retain: bool,
}

impl FrameCache {
    /// The cached frame of `message` for `key`, if that is the one held.
    pub(super) fn get(&self, message: &Arc<Message>, key: FrameKey) -> Option<&[u8]> {
        let held = self.message.as_ref()?;
        let hit = Arc::ptr_eq(held, message)
            && self.protocol == Some(key.protocol)
            && self.retain == key.retain;
        hit.then_some(self.frame.as_slice())
    }

    /// Remembers `frame` as `message`'s frame for `key`.
    pub(super) fn store(&mut self, message: &Arc<Message>, key: FrameKey, frame: &[u8]) {
        if !self
            .message
            .as_ref()
            .is_some_and(|m| Arc::ptr_eq(m, message))
        {
            self.message = Some(Arc::clone(message));
        }
        self.protocol = Some(key.protocol);
        self.retain = key.retain;
        self.frame.clear();
        self.frame.extend_from_slice(frame);
    }

    /// Lets the held message go (at the end of a turn, so a cached message is not kept alive).
    pub(super) fn clear(&mut self) {
        self.message = None;
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use codec::{MqttStr, PublishProperties, QoS, SharedPublish};

    use super::*;

    fn message(payload: &'static [u8]) -> Arc<Message> {
        let topic = MqttStr::from_bytes(Bytes::from_static(b"a/b")).expect("valid topic");
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
        })
    }

    const V4: FrameKey = FrameKey {
        protocol: ProtocolVersion::V3_1_1,
        retain: false,
    };

    #[test]
    fn hits_only_for_the_same_message_and_key() {
        let mut cache = FrameCache::default();
        let (first, second) = (message(b"one"), message(b"two"));
        assert_eq!(cache.get(&first, V4), None);
        cache.store(&first, V4, b"frame-1");
        assert_eq!(cache.get(&first, V4), Some(&b"frame-1"[..]));
        assert_eq!(cache.get(&second, V4), None, "another message");
        let retained = FrameKey { retain: true, ..V4 };
        assert_eq!(cache.get(&first, retained), None, "another RETAIN flag");
        let v5 = FrameKey {
            protocol: ProtocolVersion::V5,
            ..V4
        };
        assert_eq!(cache.get(&first, v5), None, "another protocol");
        cache.store(&second, V4, b"frame-2");
        assert_eq!(cache.get(&first, V4), None);
        assert_eq!(cache.get(&second, V4), Some(&b"frame-2"[..]));
    }

    #[test]
    fn clearing_lets_the_message_go() {
        let mut cache = FrameCache::default();
        let held = message(b"one");
        cache.store(&held, V4, b"frame");
        assert_eq!(Arc::strong_count(&held), 2);
        cache.clear();
        assert_eq!(Arc::strong_count(&held), 1);
        assert_eq!(cache.get(&held, V4), None);
    }
}
