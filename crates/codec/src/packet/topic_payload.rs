//! `TopicPayload`: the Topic Name and payload of a PUBLISH behind one shared buffer handle.
//!
//! A decoded PUBLISH keeps its received frame as a single `Bytes` with the topic and the
//! payload as ranges of it. Every `Bytes` handle costs an atomic reference-count increment when
//! it is made and a decrement when it is dropped, and on the small packets MQTT mostly carries
//! those atomics were most of the decode time; one handle instead of two halves them. Handles
//! of their own ([`TopicPayload::shared_topic`], [`TopicPayload::into_parts`]) are made only
//! when a user asks for them.

use std::fmt;

use bytes::{Buf, Bytes};

use crate::string::MqttStr;

/// The Topic Name and payload of a PUBLISH, validated, sharing the buffer they came from.
#[derive(Clone)]
pub struct TopicPayload(Repr);

#[derive(Clone)]
enum Repr {
    /// A received PUBLISH body (variable header and payload): the topic is
    /// `frame[TOPIC_AT..TOPIC_AT + topic_len]` (validated while decoding), the payload
    /// `frame[payload_at..]`.
    Frame {
        frame: Bytes,
        topic_len: u16,
        payload_at: usize,
    },
    /// A topic and a payload from separate buffers (a PUBLISH built by its sender).
    Parts { topic: MqttStr, payload: Bytes },
}

/// Where the Topic Name starts in a PUBLISH body: after its two-byte length.
const TOPIC_AT: usize = 2;

impl TopicPayload {
    /// A topic and a payload as they are (nothing is copied).
    pub fn new(topic: MqttStr, payload: Bytes) -> Self {
        Self(Repr::Parts { topic, payload })
    }

    /// The body of a received PUBLISH whose topic (`topic_len` bytes at offset 2) the caller
    /// validated and whose payload starts at `payload_at`.
    #[inline]
    pub(crate) fn from_frame(frame: Bytes, topic_len: u16, payload_at: usize) -> Self {
        debug_assert!(TOPIC_AT + usize::from(topic_len) <= payload_at && payload_at <= frame.len());
        Self(Repr::Frame {
            frame,
            topic_len,
            payload_at,
        })
    }

    /// The Topic Name. This re-checks UTF-8 (a fast scan: the crate forbids `unsafe`, so the
    /// unchecked conversion is not available); [`Self::topic_bytes`] does not.
    pub fn topic(&self) -> &str {
        std::str::from_utf8(self.topic_bytes()).expect("invariant: the topic is validated UTF-8")
    }

    /// The Topic Name's UTF-8 bytes.
    #[inline]
    pub fn topic_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Frame {
                frame, topic_len, ..
            } => &frame[TOPIC_AT..TOPIC_AT + usize::from(*topic_len)],
            Repr::Parts { topic, .. } => topic.as_bytes(),
        }
    }

    /// The payload.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        match &self.0 {
            Repr::Frame {
                frame, payload_at, ..
            } => &frame[*payload_at..],
            Repr::Parts { payload, .. } => payload,
        }
    }

    /// A handle of its own to the Topic Name (for a received PUBLISH, a reference-count
    /// increment on the frame; nothing is copied).
    pub fn shared_topic(&self) -> MqttStr {
        match &self.0 {
            Repr::Frame {
                frame, topic_len, ..
            } => MqttStr::from_validated(frame.slice(TOPIC_AT..TOPIC_AT + usize::from(*topic_len))),
            Repr::Parts { topic, .. } => topic.clone(),
        }
    }

    /// A handle of its own to the payload (a reference-count increment; nothing is copied).
    pub fn shared_payload(&self) -> Bytes {
        match &self.0 {
            Repr::Frame {
                frame, payload_at, ..
            } => frame.slice(*payload_at..),
            Repr::Parts { payload, .. } => payload.clone(),
        }
    }

    /// The topic and the payload as separate handles (for a received PUBLISH, one
    /// reference-count increment for the topic; the payload takes over the frame's handle).
    pub fn into_parts(self) -> (MqttStr, Bytes) {
        match self.0 {
            Repr::Frame {
                mut frame,
                topic_len,
                payload_at,
            } => {
                let topic = frame.slice(TOPIC_AT..TOPIC_AT + usize::from(topic_len));
                frame.advance(payload_at);
                (MqttStr::from_validated(topic), frame)
            }
            Repr::Parts { topic, payload } => (topic, payload),
        }
    }

    /// Replaces the Topic Name (a received topic alias resolved to its topic, for example).
    pub fn set_topic(&mut self, topic: MqttStr) {
        let payload = std::mem::take(self).into_parts().1;
        self.0 = Repr::Parts { topic, payload };
    }

    /// Replaces the payload.
    pub fn set_payload(&mut self, payload: Bytes) {
        let topic = std::mem::take(self).into_parts().0;
        self.0 = Repr::Parts { topic, payload };
    }
}

impl Default for TopicPayload {
    /// An empty topic and an empty payload.
    fn default() -> Self {
        Self::new(MqttStr::default(), Bytes::new())
    }
}

impl PartialEq for TopicPayload {
    fn eq(&self, other: &Self) -> bool {
        self.topic_bytes() == other.topic_bytes() && self.payload() == other.payload()
    }
}

impl Eq for TopicPayload {}

impl fmt::Debug for TopicPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicPayload")
            .field("topic", &self.topic())
            .field(
                "payload",
                &format_args!("b\"{}\"", self.payload().escape_ascii()),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received() -> TopicPayload {
        // Topic "a/b", packet identifier 7, payload "hello".
        let frame = Bytes::from_static(b"\x00\x03a/b\x00\x07hello");
        TopicPayload::from_frame(frame, 3, 7)
    }

    #[test]
    fn a_received_frame_serves_topic_and_payload_from_one_buffer() {
        let content = received();
        assert_eq!(content.topic(), "a/b");
        assert_eq!(content.payload(), b"hello");
        let (topic, payload) = content.clone().into_parts();
        assert_eq!((topic.as_str(), &payload[..]), ("a/b", &b"hello"[..]));
        assert_eq!(content.shared_topic(), topic);
        assert_eq!(content.shared_payload(), payload);
        assert_eq!(content.topic_bytes().as_ptr(), topic.as_bytes().as_ptr());
        assert_eq!(content.payload().as_ptr(), payload.as_ptr());
    }

    #[test]
    fn equality_ignores_the_representation() {
        let built = TopicPayload::new(
            MqttStr::from_static("a/b").expect("valid"),
            Bytes::from_static(b"hello"),
        );
        assert_eq!(built, received());
        assert_eq!(format!("{built:?}"), format!("{:?}", received()));
    }

    #[test]
    fn setters_keep_the_other_part() {
        let mut content = received();
        content.set_topic(MqttStr::from_static("c").expect("valid"));
        assert_eq!((content.topic(), content.payload()), ("c", &b"hello"[..]));
        let mut content = received();
        content.set_payload(Bytes::from_static(b"bye"));
        assert_eq!((content.topic(), content.payload()), ("a/b", &b"bye"[..]));
    }
}
