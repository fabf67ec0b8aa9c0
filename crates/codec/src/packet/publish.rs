//! PUBLISH (MQTT 3.1.1 section 3.3, 5.0 section 3.3): the hot path. Topic and payload are
//! ranges of the received frame behind one buffer handle ([`TopicPayload`]); empty properties
//! allocate nothing.

use bytes::{BufMut, Bytes, BytesMut};

use super::{PacketType, TopicPayload, Wire};
use crate::properties::{
    PayloadFormat, PublishProperties, PublishPropertiesBox, decode_boxed_properties, measure_if_v5,
    write_block,
};
use crate::read::Reader;
use crate::string::{self, MqttStr};
use crate::write::put_binary;
use crate::{DecodeError, EncodeError, PacketId, ProtocolVersion, QoS};

const DUP: u8 = 0b1000;
const RETAIN: u8 = 0b0001;

/// PUBLISH: an application message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    /// DUP: this may be a re-delivery (never set with QoS 0).
    pub dup: bool,
    /// QoS of this delivery.
    pub qos: QoS,
    /// RETAIN.
    pub retain: bool,
    /// Packet Identifier: present exactly when QoS is 1 or 2.
    pub packet_id: Option<PacketId>,
    /// Topic Name (no wildcards; empty only with a 5.0 topic alias) and application payload.
    pub content: TopicPayload,
    /// PUBLISH properties (5.0; empty for 3.x), allocated only when there are any.
    pub properties: PublishPropertiesBox,
}

impl Publish {
    /// A QoS 0 PUBLISH of `payload` to `topic`, without DUP, RETAIN or properties.
    pub fn new(topic: MqttStr, payload: Bytes) -> Self {
        Self {
            dup: false,
            qos: QoS::AtMostOnce,
            retain: false,
            packet_id: None,
            content: TopicPayload::new(topic, payload),
            properties: PublishPropertiesBox::default(),
        }
    }

    /// The Topic Name (re-checks UTF-8; see [`TopicPayload::topic`]).
    pub fn topic(&self) -> &str {
        self.content.topic()
    }

    /// The Topic Name's bytes.
    #[inline]
    pub fn topic_bytes(&self) -> &[u8] {
        self.content.topic_bytes()
    }

    /// The application payload.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        self.content.payload()
    }

    /// Checks the payload against its Payload Format Indicator: [`DecodeError::PayloadFormatInvalid`]
    /// (reason 0x99) if it says UTF-8 and the payload is not. Not done while decoding because
    /// it costs a pass over the payload; the broker calls it where it wants the check.
    pub fn check_payload_format(&self) -> Result<(), DecodeError> {
        check_payload_format(self.properties.payload_format, self.payload(), "payload")
    }
}

/// Checks `payload` against `format`.
pub(crate) fn check_payload_format(
    format: Option<PayloadFormat>,
    payload: &[u8],
    field: &'static str,
) -> Result<(), DecodeError> {
    if format == Some(PayloadFormat::Utf8) && std::str::from_utf8(payload).is_err() {
        return Err(DecodeError::PayloadFormatInvalid { field });
    }
    Ok(())
}

/// The fixed header flags of a PUBLISH, or the error that forbids them.
#[inline]
pub(crate) fn parse_flags(flags: u8) -> Result<(bool, QoS, bool), DecodeError> {
    let qos = QoS::from_u8((flags >> 1) & 0b11).ok_or(DecodeError::InvalidQoS {
        field: "PUBLISH fixed header",
    })?;
    let dup = flags & DUP != 0;
    if dup && qos == QoS::AtMostOnce {
        return Err(DecodeError::DupWithQoS0);
    }
    Ok((dup, qos, flags & RETAIN != 0))
}

/// Validates the parts of a PUBLISH that do not depend on the payload ([`crate::SharedPublish`]
/// checks the topic once when built and only the flags per frame).
pub(crate) fn check_encodable(
    dup: bool,
    qos: QoS,
    packet_id: Option<PacketId>,
    topic: &[u8],
    has_alias: bool,
    protocol: ProtocolVersion,
) -> Result<(), EncodeError> {
    check_flags(dup, qos, packet_id)?;
    let empty_allowed = protocol.is_v5() && has_alias;
    if string::has_wildcard(topic) || (topic.is_empty() && !empty_allowed) {
        return Err(EncodeError::InvalidTopicName {
            field: "topic name",
        });
    }
    Ok(())
}

/// A packet identifier exactly with QoS 1/2, and DUP only with them.
pub(crate) fn check_flags(
    dup: bool,
    qos: QoS,
    packet_id: Option<PacketId>,
) -> Result<(), EncodeError> {
    if packet_id.is_some() != (qos != QoS::AtMostOnce) {
        return Err(EncodeError::PacketIdMismatch { qos });
    }
    if dup && qos == QoS::AtMostOnce {
        return Err(EncodeError::DupWithQoS0);
    }
    Ok(())
}

/// The first byte of a PUBLISH fixed header.
pub(crate) fn first_byte(dup: bool, qos: QoS, retain: bool) -> u8 {
    let mut byte = (PacketType::Publish as u8) << 4 | qos.as_u8() << 1;
    if dup {
        byte |= DUP;
    }
    if retain {
        byte |= RETAIN;
    }
    byte
}

impl Wire for Publish {
    const TYPE: PacketType = PacketType::Publish;
    type Plan = usize;

    fn decode(flags: u8, body: Reader, protocol: ProtocolVersion) -> Result<Self, DecodeError> {
        decode_into(flags, body, protocol, |publish| publish)
    }

    fn flags(&self) -> u8 {
        first_byte(self.dup, self.qos, self.retain) & 0x0F
    }

    fn measure(&self, protocol: ProtocolVersion) -> Result<(usize, usize), EncodeError> {
        let has_alias = self.properties.topic_alias.is_some();
        check_encodable(
            self.dup,
            self.qos,
            self.packet_id,
            self.topic_bytes(),
            has_alias,
            protocol,
        )?;
        let mut len = 2 + self.topic_bytes().len() + self.payload().len();
        if self.packet_id.is_some() {
            len += 2;
        }
        let (block, props) = measure_if_v5(&*self.properties, protocol)?;
        Ok((len + block, props))
    }

    fn write(&self, protocol: ProtocolVersion, props: &usize, buf: &mut BytesMut) {
        put_binary(buf, self.topic_bytes());
        if let Some(id) = self.packet_id {
            buf.put_u16(id.get());
        }
        if protocol.is_v5() {
            write_block(buf, &*self.properties, *props);
        }
        buf.put_slice(self.payload());
    }
}

/// Decodes a PUBLISH body and returns it wrapped by `wrap` (in a `Packet`, say).
///
/// Always inlined, with the wrapping done in the final expression, so that the packet is built
/// in the caller's return slot: built apart and then moved through `Result`, `Option` and
/// `Packet`, it was copied right after being written, and the copy's wide loads of the fresh
/// narrow stores stalled on store forwarding.
#[inline(always)]
pub(crate) fn decode_into<T>(
    flags: u8,
    body: Reader,
    protocol: ProtocolVersion,
    wrap: impl FnOnce(Publish) -> T,
) -> Result<T, DecodeError> {
    let mut body = body.keeping_whole();
    let (dup, qos, retain) = parse_flags(flags)?;
    let topic_len = body.topic_name_in_place("topic name")?;
    let packet_id = match qos {
        QoS::AtMostOnce => None,
        _ => Some(body.packet_id(PacketType::Publish)?),
    };
    let properties = if protocol.is_v5() {
        decode_boxed_properties::<PublishProperties>(&mut body, "PUBLISH")?
    } else {
        None
    };
    let has_alias = properties
        .as_ref()
        .is_some_and(|set| set.topic_alias.is_some());
    if topic_len == 0 && !has_alias {
        return Err(DecodeError::EmptyTopicName {
            field: "topic name",
        });
    }
    let (frame, payload_at) = body.into_buffer();
    Ok(wrap(Publish {
        dup,
        qos,
        retain,
        packet_id,
        content: TopicPayload::from_frame(frame, topic_len, payload_at),
        properties: PublishPropertiesBox::from_decoded(properties),
    }))
}
