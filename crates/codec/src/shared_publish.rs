//! `SharedPublish`: a PUBLISH encoded once and sent to many subscribers. Each subscriber gets a
//! small header of its own (fixed header, topic, packet identifier, per-subscriber properties)
//! while the properties every subscriber shares and the payload stay one `Bytes` each, ready
//! for a vectored write. The payload is never copied.

use std::num::NonZeroU16;

use bytes::{BufMut, Bytes, BytesMut};

use crate::packet::publish::{check_flags, first_byte};
use crate::properties::{BufSink, LenSink, PublishProperties, message::write_routing};
use crate::string::MqttStr;
use crate::write::{self, len_prefix, put_str};
use crate::{EncodeError, PacketId, ProtocolVersion, Publish, QoS, SubscriptionId};

/// A message ready to be framed for any number of subscribers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedPublish {
    topic: MqttStr,
    payload: Bytes,
    /// The encoded 5.0 properties that do not vary per subscriber.
    shared_properties: Bytes,
}

/// How a 5.0 frame uses a topic alias (ignored for 3.x, which always sends the topic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicAliasUse {
    /// Send the topic name with the alias so the receiver learns the mapping.
    Establish(NonZeroU16),
    /// Send an empty topic name with an alias the receiver already knows.
    Reuse(NonZeroU16),
}

impl TopicAliasUse {
    fn alias(self) -> NonZeroU16 {
        match self {
            Self::Establish(alias) | Self::Reuse(alias) => alias,
        }
    }
}

/// What differs between the frames of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameOptions<'a> {
    /// Protocol version of the receiving connection.
    pub protocol: ProtocolVersion,
    /// QoS of this delivery.
    pub qos: QoS,
    /// Packet identifier: present exactly when `qos` is 1 or 2.
    pub packet_id: Option<PacketId>,
    /// DUP (re-delivery).
    pub dup: bool,
    /// RETAIN as sent to this subscriber.
    pub retain: bool,
    /// Message Expiry Interval left for this delivery (5.0).
    pub message_expiry_interval: Option<u32>,
    /// Topic alias for this connection (5.0).
    pub topic_alias: Option<TopicAliasUse>,
    /// Subscription identifiers of the matching subscriptions (5.0).
    pub subscription_identifiers: &'a [SubscriptionId],
}

impl<'a> FrameOptions<'a> {
    /// A QoS 0 frame without retain, alias, expiry or subscription identifiers.
    pub const fn new(protocol: ProtocolVersion) -> Self {
        Self {
            protocol,
            qos: QoS::AtMostOnce,
            packet_id: None,
            dup: false,
            retain: false,
            message_expiry_interval: None,
            topic_alias: None,
            subscription_identifiers: &[],
        }
    }
}

/// The sizes of one frame, computed before it is written.
struct Layout {
    v5: bool,
    alias: Option<TopicAliasUse>,
    send_topic: bool,
    properties_len: usize,
    shared_len: usize,
    header_body: usize,
    remaining: usize,
}

/// One subscriber's PUBLISH frame: `header`, then `properties`, then `payload` on the wire.
/// Only `header` was written for this frame; the other two are shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishFrame {
    /// Fixed header, topic, packet identifier, property length and per-subscriber properties.
    pub header: Bytes,
    /// The shared 5.0 properties (empty for 3.x).
    pub properties: Bytes,
    /// The shared payload.
    pub payload: Bytes,
}

impl PublishFrame {
    /// The three parts in wire order, for a vectored write (some may be empty).
    pub fn parts(&self) -> [&Bytes; 3] {
        [&self.header, &self.properties, &self.payload]
    }

    /// Total size on the wire.
    pub fn len(&self) -> usize {
        self.header.len() + self.properties.len() + self.payload.len()
    }

    /// Always false: a frame has at least a fixed header.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the whole frame to `buf` (a copy; for transports without vectored writes).
    pub fn write_to(&self, buf: &mut BytesMut) {
        buf.reserve(self.len());
        for part in self.parts() {
            buf.put_slice(part);
        }
    }
}

impl SharedPublish {
    /// Encodes the shared parts of a message once. `properties` supplies the properties all
    /// subscribers share (payload format, response topic, correlation data, user properties,
    /// content type); its expiry, alias and subscription identifiers are ignored because they
    /// are set per frame through [`FrameOptions`].
    pub fn new(
        topic: MqttStr,
        payload: Bytes,
        properties: &PublishProperties,
    ) -> Result<Self, EncodeError> {
        if topic.is_empty() || topic.has_wildcard() {
            return Err(EncodeError::InvalidTopicName {
                field: "topic name",
            });
        }
        let mut len = LenSink::default();
        properties.write_shared(&mut len);
        if let Some(error) = len.error {
            return Err(error);
        }
        let mut shared = BytesMut::with_capacity(len.len);
        properties.write_shared(&mut BufSink(&mut shared));
        Ok(Self {
            topic,
            payload,
            shared_properties: shared.freeze(),
        })
    }

    /// The shared parts of a received PUBLISH (its topic must be resolved: not empty).
    pub fn from_publish(publish: &Publish) -> Result<Self, EncodeError> {
        Self::new(
            publish.content.shared_topic(),
            publish.content.shared_payload(),
            &publish.properties,
        )
    }

    /// A message from parts an earlier [`Self::new`] produced (`shared_properties` as
    /// [`Self::shared_properties`] gave them): how a stored message comes back after a restart.
    pub fn from_parts(
        topic: MqttStr,
        payload: Bytes,
        shared_properties: Bytes,
    ) -> Result<Self, EncodeError> {
        if topic.is_empty() || topic.has_wildcard() {
            return Err(EncodeError::InvalidTopicName {
                field: "topic name",
            });
        }
        Ok(Self {
            topic,
            payload,
            shared_properties,
        })
    }

    /// The encoded 5.0 properties every subscriber gets (what a stored message keeps).
    pub fn shared_properties(&self) -> &Bytes {
        &self.shared_properties
    }

    /// The topic name.
    pub fn topic(&self) -> &MqttStr {
        &self.topic
    }

    /// The payload.
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// Builds one subscriber's frame. `scratch` is cleared, the header is written into it and
    /// split off; its spare capacity serves the next call (reserve a few KiB in it to write
    /// many headers per allocation). The frame holds three shared handles (header, common
    /// properties, payload); [`Self::write_header`] needs only the payload's.
    pub fn frame(
        &self,
        options: &FrameOptions<'_>,
        scratch: &mut BytesMut,
    ) -> Result<PublishFrame, EncodeError> {
        scratch.clear();
        let v5 = self.encode_header(options, false, scratch)?;
        Ok(PublishFrame {
            header: scratch.split().freeze(),
            properties: if v5 {
                self.shared_properties.clone()
            } else {
                Bytes::new()
            },
            payload: self.payload.clone(),
        })
    }

    /// Appends one subscriber's complete header (fixed header, topic, packet identifier and
    /// every property, the common ones copied: they are small) to `out`; the frame is that
    /// header followed by [`Self::payload`]. The cheapest way to fan out: headers of many
    /// frames batch in one write buffer and each frame adds one payload reference.
    pub fn write_header(
        &self,
        options: &FrameOptions<'_>,
        out: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        self.encode_header(options, true, out).map(|_| ())
    }

    /// The size on the wire of the frame `options` describe (to check a receiver's Maximum
    /// Packet Size before anything is written).
    pub fn frame_len(&self, options: &FrameOptions<'_>) -> Result<usize, EncodeError> {
        let layout = self.layout(options)?;
        Ok(1 + write::len_prefix(layout.remaining) + layout.remaining)
    }

    /// Appends one subscriber's whole frame (header, properties and a copy of the payload) to
    /// `out`: for small payloads, where one contiguous buffer per connection is cheaper than
    /// a shared reference per frame.
    pub fn write_frame(
        &self,
        options: &FrameOptions<'_>,
        out: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        let layout = self.layout(options)?;
        out.reserve(1 + 4 + layout.remaining);
        self.put_header(options, &layout, true, out);
        out.put_slice(&self.payload);
        Ok(())
    }

    /// Checks `options` and appends the header, with the common properties when
    /// `with_shared` (otherwise the frame continues with them). Returns whether the frame is
    /// 5.0 (has properties).
    fn encode_header(
        &self,
        options: &FrameOptions<'_>,
        with_shared: bool,
        out: &mut BytesMut,
    ) -> Result<bool, EncodeError> {
        let layout = self.layout(options)?;
        let shared_len = if with_shared { layout.shared_len } else { 0 };
        out.reserve(1 + 4 + layout.header_body + shared_len);
        self.put_header(options, &layout, with_shared, out);
        Ok(layout.v5)
    }

    /// Checks `options` and computes the sizes of the frame they describe.
    fn layout(&self, options: &FrameOptions<'_>) -> Result<Layout, EncodeError> {
        let v5 = options.protocol.is_v5();
        let alias = options.topic_alias.filter(|_| v5);
        let send_topic = !matches!(alias, Some(TopicAliasUse::Reuse(_)));
        let id = options.packet_id;
        // The topic was checked once in `new` (not empty, no wildcard); an empty topic is sent
        // only with an alias the receiver knows, which is valid.
        check_flags(options.dup, options.qos, id)?;
        let topic_len = if send_topic { self.topic.len() } else { 0 };

        let mut routing = LenSink::default();
        let mut properties_len = 0;
        if v5 {
            self.write_routing(options, alias, &mut routing);
            properties_len = routing.len + self.shared_properties.len();
        }
        let shared_len = if v5 { self.shared_properties.len() } else { 0 };
        let mut header_body = 2 + topic_len + 2 * usize::from(id.is_some());
        if v5 {
            header_body += len_prefix(properties_len) + routing.len;
        }
        let remaining = header_body + shared_len + self.payload.len();
        write::frame_len(remaining)?;
        Ok(Layout {
            v5,
            alias,
            send_topic,
            properties_len,
            shared_len,
            header_body,
            remaining,
        })
    }

    /// Writes the header `layout` describes (room already reserved).
    fn put_header(
        &self,
        options: &FrameOptions<'_>,
        layout: &Layout,
        with_shared: bool,
        out: &mut BytesMut,
    ) {
        let first = first_byte(options.dup, options.qos, options.retain);
        write::put_fixed_header(out, first, layout.remaining);
        if layout.send_topic {
            put_str(out, &self.topic);
        } else {
            put_str(out, &MqttStr::default());
        }
        if let Some(id) = options.packet_id {
            out.put_u16(id.get());
        }
        if layout.v5 {
            write::put_len(out, layout.properties_len);
            self.write_routing(options, layout.alias, &mut BufSink(out));
            if with_shared {
                out.put_slice(&self.shared_properties);
            }
        }
    }

    fn write_routing<S: crate::properties::PropertySink>(
        &self,
        options: &FrameOptions<'_>,
        alias: Option<TopicAliasUse>,
        sink: &mut S,
    ) {
        write_routing(
            sink,
            options.message_expiry_interval,
            alias.map(TopicAliasUse::alias),
            options.subscription_identifiers,
        );
    }
}
