//! PUBACK, PUBREC, PUBREL and PUBCOMP: a packet identifier, and in 5.0 an optional reason code
//! and properties (both omitted on the wire when they are Success and empty).

use bytes::{BufMut, BytesMut};

use super::{PacketType, Wire};
use crate::properties::{AckProperties, decode_properties, encoded_block_len, write_block};
use crate::read::Reader;
use crate::write::len_prefix;
use crate::{DecodeError, EncodeError, PacketId, ProtocolVersion, ReasonCode};

/// Reads a reason code that must be defined and allowed in `packet`.
pub(crate) fn read_reason(
    body: &mut Reader,
    packet: PacketType,
) -> Result<ReasonCode, DecodeError> {
    let value = body.u8("reason code")?;
    let code =
        ReasonCode::from_u8(value).ok_or(DecodeError::UnknownReasonCode { packet, value })?;
    if !code.is_allowed_in(packet) {
        return Err(DecodeError::ReasonCodeNotAllowed { packet, code });
    }
    Ok(code)
}

/// Checks that 5.0 allows `code` in `packet`.
pub(crate) fn check_reason(
    code: ReasonCode,
    packet: PacketType,
    protocol: ProtocolVersion,
) -> Result<(), EncodeError> {
    if protocol.is_v5() && !code.is_allowed_in(packet) {
        return Err(EncodeError::ReasonNotRepresentable {
            packet,
            code,
            protocol,
        });
    }
    Ok(())
}

fn decode_ack(
    packet: PacketType,
    mut body: Reader,
    protocol: ProtocolVersion,
) -> Result<(PacketId, ReasonCode, AckProperties), DecodeError> {
    let packet_id = body.packet_id(packet)?;
    let mut reason_code = ReasonCode::Success;
    let mut properties = AckProperties::default();
    if protocol.is_v5() && !body.is_empty() {
        reason_code = read_reason(&mut body, packet)?;
        if !body.is_empty() {
            properties = decode_properties(&mut body, packet.name())?;
        }
    }
    body.finish(packet)?;
    Ok((packet_id, reason_code, properties))
}

/// The remaining length and properties length of an acknowledgement.
fn measure_ack(
    packet: PacketType,
    reason_code: ReasonCode,
    properties: &AckProperties,
    protocol: ProtocolVersion,
) -> Result<(usize, usize), EncodeError> {
    if !protocol.is_v5() {
        return Ok((2, 0));
    }
    check_reason(reason_code, packet, protocol)?;
    if properties.is_empty() {
        let len = if reason_code == ReasonCode::Success {
            2
        } else {
            3
        };
        return Ok((len, 0));
    }
    let props = encoded_block_len(properties)?;
    Ok((3 + len_prefix(props) + props, props))
}

fn write_ack(
    packet_id: PacketId,
    reason_code: ReasonCode,
    properties: &AckProperties,
    (remaining, props): (usize, usize),
    buf: &mut BytesMut,
) {
    buf.put_u16(packet_id.get());
    if remaining > 2 {
        buf.put_u8(reason_code.as_u8());
    }
    if remaining > 3 {
        write_block(buf, properties, props);
    }
}

macro_rules! ack_packet {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name {
            /// Packet Identifier of the PUBLISH (or PUBREL) being acknowledged.
            pub packet_id: PacketId,
            /// Reason code (5.0; Success for 3.x, whose encoding drops it).
            pub reason_code: ReasonCode,
            /// Properties (5.0; empty for 3.x, whose encoding drops them).
            pub properties: AckProperties,
        }

        impl $name {
            /// A successful acknowledgement without properties.
            pub fn new(packet_id: PacketId) -> Self {
                Self {
                    packet_id,
                    reason_code: ReasonCode::Success,
                    properties: AckProperties::default(),
                }
            }
        }

        impl Wire for $name {
            const TYPE: PacketType = PacketType::$name;
            type Plan = (usize, usize);

            fn decode(_: u8, body: Reader, protocol: ProtocolVersion) -> Result<Self, DecodeError> {
                let (packet_id, reason_code, properties) = decode_ack(Self::TYPE, body, protocol)?;
                Ok(Self { packet_id, reason_code, properties })
            }

            fn measure(
                &self,
                protocol: ProtocolVersion,
            ) -> Result<(usize, (usize, usize)), EncodeError> {
                let plan = measure_ack(Self::TYPE, self.reason_code, &self.properties, protocol)?;
                Ok((plan.0, plan))
            }

            fn write(&self, _: ProtocolVersion, plan: &(usize, usize), buf: &mut BytesMut) {
                write_ack(self.packet_id, self.reason_code, &self.properties, *plan, buf);
            }
        }
    };
}

ack_packet!(
    /// PUBACK: acknowledges a QoS 1 PUBLISH.
    PubAck
);
ack_packet!(
    /// PUBREC: first acknowledgement of a QoS 2 PUBLISH.
    PubRec
);
ack_packet!(
    /// PUBREL: releases a QoS 2 PUBLISH (fixed header flags 0b0010).
    PubRel
);
ack_packet!(
    /// PUBCOMP: completes a QoS 2 exchange.
    PubComp
);
