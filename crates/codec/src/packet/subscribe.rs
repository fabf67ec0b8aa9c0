//! SUBSCRIBE and SUBACK (MQTT 3.1.1 sections 3.8-3.9, 5.0 sections 3.8-3.9). Topic filters are
//! checked for UTF-8 and non-emptiness only: filter syntax belongs to the router, and the
//! broker answers an invalid filter with SUBACK 0x8F.

use bytes::{BufMut, BytesMut};

use super::ack::{check_reason, read_reason};
use super::{PacketType, Wire};
use crate::properties::{
    AckProperties, SubscribeProperties, decode_if_v5, measure_if_v5, write_block,
};
use crate::read::Reader;
use crate::string::MqttStr;
use crate::write::{put_str, str_len};
use crate::{
    DecodeError, EncodeError, PacketId, ProtocolVersion, QoS, ReasonCode, RetainHandling,
    SubscriptionOptions,
};

const NO_LOCAL: u8 = 0b0000_0100;
const RETAIN_AS_PUBLISHED: u8 = 0b0000_1000;
const RETAIN_HANDLING_SHIFT: u8 = 4;

/// SUBSCRIBE: one or more topic filters with their options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// Packet Identifier.
    pub packet_id: PacketId,
    /// Topic filters (non-empty UTF-8, syntax unchecked) and their options, at least one.
    pub filters: Vec<(MqttStr, SubscriptionOptions)>,
    /// SUBSCRIBE properties (5.0; empty for 3.x).
    pub properties: SubscribeProperties,
}

/// SUBACK: one reason code per filter of the SUBSCRIBE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubAck {
    /// Packet Identifier of the SUBSCRIBE.
    pub packet_id: PacketId,
    /// One code per filter. On 3.x, Granted QoS 0/1/2 are sent as such and every error code
    /// as the single 3.1.1 failure code 0x80.
    pub reason_codes: Vec<ReasonCode>,
    /// Properties (5.0; empty for 3.x).
    pub properties: AckProperties,
}

/// Decodes one subscription options byte.
pub(crate) fn decode_options(
    byte: u8,
    protocol: ProtocolVersion,
) -> Result<SubscriptionOptions, DecodeError> {
    let invalid = DecodeError::InvalidSubscriptionOptions { options: byte };
    let reserved = if protocol.is_v5() {
        0b1100_0000
    } else {
        0b1111_1100
    };
    if byte & reserved != 0 {
        return Err(invalid);
    }
    let qos = QoS::from_u8(byte & 0b11).ok_or(invalid)?;
    let retain_handling = RetainHandling::from_u8((byte >> RETAIN_HANDLING_SHIFT) & 0b11)
        .ok_or(DecodeError::InvalidRetainHandling)?;
    Ok(SubscriptionOptions {
        qos,
        no_local: byte & NO_LOCAL != 0,
        retain_as_published: byte & RETAIN_AS_PUBLISHED != 0,
        retain_handling,
    })
}

/// Encodes one subscription options byte (3.x carries the QoS only).
pub(crate) fn encode_options(options: &SubscriptionOptions, protocol: ProtocolVersion) -> u8 {
    let mut byte = options.qos.as_u8();
    if protocol.is_v5() {
        byte |= (options.retain_handling as u8) << RETAIN_HANDLING_SHIFT;
        if options.no_local {
            byte |= NO_LOCAL;
        }
        if options.retain_as_published {
            byte |= RETAIN_AS_PUBLISHED;
        }
    }
    byte
}

/// Reads a topic filter of SUBSCRIBE or UNSUBSCRIBE: a non-empty string.
pub(crate) fn read_filter(body: &mut Reader, packet: PacketType) -> Result<MqttStr, DecodeError> {
    let filter = body.string("topic filter")?;
    if filter.is_empty() {
        return Err(DecodeError::EmptyTopicFilter { packet });
    }
    Ok(filter)
}

/// Reads entries until the body ends; an empty list is the error `empty`.
pub(crate) fn read_list<T>(
    body: &mut Reader,
    empty: DecodeError,
    mut entry: impl FnMut(&mut Reader) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut list = Vec::new();
    while !body.is_empty() {
        list.push(entry(body)?);
    }
    if list.is_empty() {
        return Err(empty);
    }
    Ok(list)
}

/// Checks that a SUBSCRIBE/UNSUBSCRIBE has filters and none is empty.
pub(crate) fn check_filters<'a>(
    mut filters: impl ExactSizeIterator<Item = &'a MqttStr>,
    packet: PacketType,
) -> Result<(), EncodeError> {
    if filters.len() == 0 || filters.any(MqttStr::is_empty) {
        return Err(EncodeError::EmptyList { packet });
    }
    Ok(())
}

impl Wire for Subscribe {
    const TYPE: PacketType = PacketType::Subscribe;
    type Plan = usize;

    fn decode(_: u8, mut body: Reader, protocol: ProtocolVersion) -> Result<Self, DecodeError> {
        let packet_id = body.packet_id(Self::TYPE)?;
        let properties = decode_if_v5(&mut body, protocol, "SUBSCRIBE")?;
        let none = DecodeError::NoTopicFilters { packet: Self::TYPE };
        let filters = read_list(&mut body, none, |body| {
            let filter = read_filter(body, Self::TYPE)?;
            let options = decode_options(body.u8("subscription options")?, protocol)?;
            Ok((filter, options))
        })?;
        Ok(Self {
            packet_id,
            filters,
            properties,
        })
    }

    fn measure(&self, protocol: ProtocolVersion) -> Result<(usize, usize), EncodeError> {
        check_filters(self.filters.iter().map(|(f, _)| f), Self::TYPE)?;
        let len = 2 + self
            .filters
            .iter()
            .map(|(f, _)| str_len(f) + 1)
            .sum::<usize>();
        let (block, props) = measure_if_v5(&self.properties, protocol)?;
        Ok((len + block, props))
    }

    fn write(&self, protocol: ProtocolVersion, props: &usize, buf: &mut BytesMut) {
        buf.put_u16(self.packet_id.get());
        if protocol.is_v5() {
            write_block(buf, &self.properties, *props);
        }
        for (filter, options) in &self.filters {
            put_str(buf, filter);
            buf.put_u8(encode_options(options, protocol));
        }
    }
}

/// The 3.x SUBACK return code for `code`, `None` if it has none.
fn v3_suback_code(code: ReasonCode) -> Option<u8> {
    match code {
        ReasonCode::Success | ReasonCode::GrantedQoS1 | ReasonCode::GrantedQoS2 => {
            Some(code.as_u8())
        }
        _ if code.is_error() => Some(0x80),
        _ => None,
    }
}

impl Wire for SubAck {
    const TYPE: PacketType = PacketType::SubAck;
    type Plan = usize;

    fn decode(_: u8, mut body: Reader, protocol: ProtocolVersion) -> Result<Self, DecodeError> {
        let packet_id = body.packet_id(Self::TYPE)?;
        let properties = decode_if_v5(&mut body, protocol, "SUBACK")?;
        let none = DecodeError::NoReasonCodes { packet: Self::TYPE };
        let reason_codes = read_list(&mut body, none, |body| {
            let code = read_reason(body, Self::TYPE)?;
            if !protocol.is_v5() && v3_suback_code(code) != Some(code.as_u8()) {
                return Err(DecodeError::UnknownReasonCode {
                    packet: Self::TYPE,
                    value: code.as_u8(),
                });
            }
            Ok(code)
        })?;
        Ok(Self {
            packet_id,
            reason_codes,
            properties,
        })
    }

    fn measure(&self, protocol: ProtocolVersion) -> Result<(usize, usize), EncodeError> {
        if self.reason_codes.is_empty() {
            return Err(EncodeError::EmptyList { packet: Self::TYPE });
        }
        for &code in &self.reason_codes {
            check_reason(code, Self::TYPE, protocol)?;
            if !protocol.is_v5() && v3_suback_code(code).is_none() {
                return Err(EncodeError::ReasonNotRepresentable {
                    packet: Self::TYPE,
                    code,
                    protocol,
                });
            }
        }
        let len = 2 + self.reason_codes.len();
        let (block, props) = measure_if_v5(&self.properties, protocol)?;
        Ok((len + block, props))
    }

    fn write(&self, protocol: ProtocolVersion, props: &usize, buf: &mut BytesMut) {
        buf.put_u16(self.packet_id.get());
        if protocol.is_v5() {
            write_block(buf, &self.properties, *props);
            for code in &self.reason_codes {
                buf.put_u8(code.as_u8());
            }
        } else {
            for &code in &self.reason_codes {
                buf.put_u8(v3_suback_code(code).unwrap_or(0x80));
            }
        }
    }
}
