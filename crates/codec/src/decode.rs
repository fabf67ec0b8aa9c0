//! Framing and decoding: [`decode`] takes at most one frame off the front of a buffer.

use bytes::{Buf, BytesMut};

use crate::packet::{
    Auth, ConnAck, Disconnect, Packet, PacketType, PingReq, PingResp, PubAck, PubComp, PubRec,
    PubRel, Publish, SubAck, Subscribe, UnsubAck, Unsubscribe, Wire,
};
use crate::read::Reader;
use crate::types::PacketId;
use crate::varint::{self, MAX_VARIABLE_BYTE_INTEGER, Varint};
use crate::{DecodeError, ProtocolVersion};

/// The largest packet MQTT can frame: one type byte, four length bytes and 268,435,455 bytes.
pub const PROTOCOL_MAX_PACKET_SIZE: u32 = 1 + 4 + MAX_VARIABLE_BYTE_INTEGER;

/// What the decoder needs to know about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Largest accepted packet in bytes, fixed header included (MQTT 5.0 "Maximum Packet
    /// Size"). Checked from the fixed header before the body is read or anything allocated.
    /// Default: [`PROTOCOL_MAX_PACKET_SIZE`]; brokers set their configured limit.
    pub max_packet_size: u32,
    /// Protocol version of the connection, used for every packet but CONNECT (which carries
    /// its own). Before CONNECT any value works: a first packet that is not CONNECT ends the
    /// connection anyway.
    pub protocol: ProtocolVersion,
}

impl Limits {
    /// Limits for `protocol` with the default maximum packet size.
    pub const fn new(protocol: ProtocolVersion) -> Self {
        Self {
            max_packet_size: PROTOCOL_MAX_PACKET_SIZE,
            protocol,
        }
    }

    /// The same limits with another maximum packet size.
    pub const fn with_max_packet_size(self, max_packet_size: u32) -> Self {
        Self {
            max_packet_size,
            ..self
        }
    }
}

/// A parsed and checked fixed header.
#[derive(Debug, Clone, Copy)]
struct FixedHeader {
    packet: PacketType,
    flags: u8,
    header_len: usize,
    frame_len: usize,
}

#[inline]
fn check_first_byte(byte: u8, protocol: ProtocolVersion) -> Result<PacketType, DecodeError> {
    let value = byte >> 4;
    let reserved = DecodeError::ReservedPacketType { value, protocol };
    let packet = PacketType::from_nibble(value).ok_or(reserved.clone())?;
    if packet == PacketType::Auth && !protocol.is_v5() {
        return Err(reserved);
    }
    let flags = byte & 0x0F;
    match packet.required_flags() {
        Some(required) if required != flags => {
            Err(DecodeError::InvalidFixedHeaderFlags { packet, flags })
        }
        Some(_) => Ok(packet),
        None => crate::packet::publish::parse_flags(flags).map(|_| packet),
    }
}

#[inline]
fn parse_fixed_header(buf: &[u8], limits: &Limits) -> Result<Option<FixedHeader>, DecodeError> {
    let Some((&first, rest)) = buf.split_first() else {
        return Ok(None);
    };
    let packet = check_first_byte(first, limits.protocol)?;
    let (remaining, len) = match varint::parse(rest) {
        Varint::Complete { value, len } => (value as usize, len),
        Varint::Incomplete => return Ok(None),
        Varint::TooLong | Varint::NonMinimal => return Err(DecodeError::MalformedRemainingLength),
    };
    let header_len = 1 + len;
    let frame_len = header_len + remaining;
    if frame_len as u64 > u64::from(limits.max_packet_size) {
        return Err(DecodeError::PacketTooLarge {
            size: frame_len as u64,
            max: limits.max_packet_size,
        });
    }
    Ok(Some(FixedHeader {
        packet,
        flags: first & 0x0F,
        header_len,
        frame_len,
    }))
}

/// The size of the frame at the front of `buf` once its fixed header is complete (`None`
/// before), after the same checks [`decode`] makes on the fixed header.
pub fn peek_frame_len(buf: &[u8], limits: &Limits) -> Result<Option<usize>, DecodeError> {
    Ok(parse_fixed_header(buf, limits)?.map(|header| header.frame_len))
}

/// Decodes the packet at the front of `buf`.
///
/// - `Ok(None)`: the frame is incomplete; nothing was consumed.
/// - `Ok(Some(packet))`: exactly one frame was consumed. Topic, payload, strings and binary
///   fields are slices of that frame: nothing is copied.
/// - `Err(error)`: the stream is not valid MQTT; the connection must be closed (after sending
///   [`DecodeError::reason_code`] where the protocol allows). Errors found in the fixed header
///   consume nothing; later ones consume the offending frame.
///
/// The maximum packet size is checked as soon as the fixed header is complete, before the body
/// has arrived.
#[inline]
pub fn decode(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Packet>, DecodeError> {
    let Some(header) = parse_fixed_header(buf, limits)? else {
        return Ok(None);
    };
    if buf.len() < header.frame_len {
        return Ok(None);
    }
    if let Some(ack) = short_ack(&header, buf) {
        buf.advance(header.frame_len);
        return ack.map(|ack| Some(ack.into_packet()));
    }
    // The frame is split off whole and the fixed header skipped on the frozen handle, where
    // advancing is two additions (on a `BytesMut` it is a call with several cases).
    let mut frame = buf.split_to(header.frame_len).freeze();
    frame.advance(header.header_len);
    let body = Reader::new(frame);
    // PUBLISH is the hot path: decoded here so the packet is built in place.
    if header.packet == PacketType::Publish {
        let wrap = |publish| Some(Packet::Publish(publish));
        return crate::packet::publish::decode_into(header.flags, body, limits.protocol, wrap);
    }
    decode_other(header, body, limits.protocol).map(Some)
}

/// A PUBACK, PUBREC, PUBREL or PUBCOMP that holds only its packet identifier (every 3.1.1 one;
/// a 5.0 one with reason Success and no properties): what every QoS 1/2 flow sends, read without
/// building a [`Packet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortAck {
    /// PUBACK, PUBREC, PUBREL or PUBCOMP.
    pub packet: PacketType,
    /// The flow it acknowledges.
    pub packet_id: PacketId,
}

impl ShortAck {
    /// The same acknowledgement as a packet (reason Success, no properties).
    pub fn into_packet(self) -> Packet {
        let id = self.packet_id;
        match self.packet {
            PacketType::PubAck => Packet::PubAck(PubAck::new(id)),
            PacketType::PubRec => Packet::PubRec(PubRec::new(id)),
            PacketType::PubRel => Packet::PubRel(PubRel::new(id)),
            _ => Packet::PubComp(PubComp::new(id)),
        }
    }
}

/// Takes a [`ShortAck`] off the front of `buf` if one is there whole, after the checks
/// [`decode`] makes; `Ok(None)`, consuming nothing, for any other or incomplete frame (which
/// [`decode`] then reads). A receiver's hot path: each acknowledgement costs a look at four
/// bytes, not a packet moved through its handlers.
#[inline]
pub fn take_short_ack(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<ShortAck>, DecodeError> {
    // Types 4 to 7: PUBACK, PUBREC, PUBREL, PUBCOMP.
    if !matches!(buf.first().map(|b| b >> 4), Some(4..=7)) {
        return Ok(None);
    }
    let Some(header) = parse_fixed_header(buf, limits)? else {
        return Ok(None);
    };
    if buf.len() < header.frame_len {
        return Ok(None);
    }
    let Some(ack) = short_ack(&header, buf) else {
        return Ok(None);
    };
    buf.advance(header.frame_len);
    ack.map(Some)
}

/// The short acknowledgement `header` frames, read where it lies in `buf` (which holds the
/// whole frame): no handle on the frame is made and dropped for four bytes. `None` for any
/// other frame.
fn short_ack(header: &FixedHeader, buf: &[u8]) -> Option<Result<ShortAck, DecodeError>> {
    if header.frame_len != header.header_len + 2 {
        return None;
    }
    let packet = header.packet;
    if !matches!(
        packet,
        PacketType::PubAck | PacketType::PubRec | PacketType::PubRel | PacketType::PubComp
    ) {
        return None;
    }
    let id = u16::from_be_bytes([buf[header.header_len], buf[header.header_len + 1]]);
    Some(
        PacketId::new(id)
            .map(|packet_id| ShortAck { packet, packet_id })
            .ok_or(DecodeError::ZeroPacketId { packet }),
    )
}

fn body<P: Wire>(
    header: FixedHeader,
    body: Reader,
    protocol: ProtocolVersion,
) -> Result<P, DecodeError> {
    P::decode(header.flags, body, protocol)
}

#[inline(never)]
fn decode_other(
    header: FixedHeader,
    reader: Reader,
    protocol: ProtocolVersion,
) -> Result<Packet, DecodeError> {
    let (h, r, p) = (header, reader, protocol);
    Ok(match header.packet {
        PacketType::Publish => Packet::Publish(body::<Publish>(h, r, p)?),
        PacketType::Connect => Packet::ConnectFrame(crate::packet::connect_frame::decode_frame(r)?),
        PacketType::ConnAck => Packet::ConnAck(Box::new(body::<ConnAck>(h, r, p)?)),
        PacketType::PubAck => Packet::PubAck(body::<PubAck>(h, r, p)?),
        PacketType::PubRec => Packet::PubRec(body::<PubRec>(h, r, p)?),
        PacketType::PubRel => Packet::PubRel(body::<PubRel>(h, r, p)?),
        PacketType::PubComp => Packet::PubComp(body::<PubComp>(h, r, p)?),
        PacketType::Subscribe => Packet::Subscribe(body::<Subscribe>(h, r, p)?),
        PacketType::SubAck => Packet::SubAck(body::<SubAck>(h, r, p)?),
        PacketType::Unsubscribe => Packet::Unsubscribe(body::<Unsubscribe>(h, r, p)?),
        PacketType::UnsubAck => Packet::UnsubAck(body::<UnsubAck>(h, r, p)?),
        PacketType::PingReq => Packet::PingReq(body::<PingReq>(h, r, p)?),
        PacketType::PingResp => Packet::PingResp(body::<PingResp>(h, r, p)?),
        PacketType::Disconnect => Packet::Disconnect(body::<Disconnect>(h, r, p)?),
        PacketType::Auth => Packet::Auth(body::<Auth>(h, r, p)?),
    })
}
