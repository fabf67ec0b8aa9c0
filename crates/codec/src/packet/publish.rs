//! PUBLISH (MQTT 3.1.1 section 3.3, 5.0 section 3.3): the hot path. Topic and payload are
//! slices of the received frame; empty properties allocate nothing.

use bytes::{BufMut, Bytes, BytesMut};

use super::{PacketType, Wire};
use crate::properties::{
    PayloadFormat, PublishProperties, decode_if_v5, measure_if_v5, write_block,
};
use crate::read::Reader;
use crate::string::MqttStr;
use crate::write::{put_str, str_len};
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
    /// Topic Name (no wildcards; empty only with a 5.0 topic alias).
    pub topic: MqttStr,
    /// Packet Identifier: present exactly when QoS is 1 or 2.
    pub packet_id: Option<PacketId>,
    /// Application payload.
    pub payload: Bytes,
    /// PUBLISH properties (5.0; empty for 3.x).
    pub properties: PublishProperties,
}

impl Publish {
    /// Checks the payload against its Payload Format Indicator: [`DecodeError::PayloadFormatInvalid`]
    /// (reason 0x99) if it says UTF-8 and the payload is not. Not done while decoding because
    /// it costs a pass over the payload; the broker calls it where it wants the check.
    pub fn check_payload_format(&self) -> Result<(), DecodeError> {
        check_payload_format(self.properties.payload_format, &self.payload, "payload")
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

/// Validates the parts of a PUBLISH that do not depend on the payload; shared with
/// [`crate::SharedPublish`].
pub(crate) fn check_encodable(
    dup: bool,
    qos: QoS,
    packet_id: Option<PacketId>,
    topic: &MqttStr,
    has_alias: bool,
    protocol: ProtocolVersion,
) -> Result<(), EncodeError> {
    check_flags(dup, qos, packet_id)?;
    let empty_allowed = protocol.is_v5() && has_alias;
    if topic.has_wildcard() || (topic.is_empty() && !empty_allowed) {
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

    // Always inlined into `decode`, so the packet is built in its final place instead of
    // being copied (it is about 230 bytes) through intermediate results.
    #[inline(always)]
    fn decode(flags: u8, mut body: Reader, protocol: ProtocolVersion) -> Result<Self, DecodeError> {
        let (dup, qos, retain) = parse_flags(flags)?;
        let topic = body.topic_name("topic name")?;
        let packet_id = match qos {
            QoS::AtMostOnce => None,
            _ => Some(body.packet_id(Self::TYPE)?),
        };
        let properties: PublishProperties = decode_if_v5(&mut body, protocol, "PUBLISH")?;
        if topic.is_empty() && properties.topic_alias.is_none() {
            return Err(DecodeError::EmptyTopicName {
                field: "topic name",
            });
        }
        Ok(Self {
            dup,
            qos,
            retain,
            topic,
            packet_id,
            payload: body.rest(),
            properties,
        })
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
            &self.topic,
            has_alias,
            protocol,
        )?;
        let mut len = str_len(&self.topic) + self.payload.len();
        if self.packet_id.is_some() {
            len += 2;
        }
        let (block, props) = measure_if_v5(&self.properties, protocol)?;
        Ok((len + block, props))
    }

    fn write(&self, protocol: ProtocolVersion, props: &usize, buf: &mut BytesMut) {
        put_str(buf, &self.topic);
        if let Some(id) = self.packet_id {
            buf.put_u16(id.get());
        }
        if protocol.is_v5() {
            write_block(buf, &self.properties, *props);
        }
        buf.put_slice(&self.payload);
    }
}
