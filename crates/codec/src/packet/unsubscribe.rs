//! UNSUBSCRIBE and UNSUBACK (MQTT 3.1.1 sections 3.10-3.11, 5.0 sections 3.10-3.11).

use bytes::{BufMut, BytesMut};

use super::ack::{check_reason, read_reason};
use super::subscribe::{check_filters, read_filter, read_list};
use super::{PacketType, Wire};
use crate::properties::{
    AckProperties, UnsubscribeProperties, decode_if_v5, decode_properties, encoded_block_len,
    measure_if_v5, write_block,
};
use crate::read::Reader;
use crate::string::MqttStr;
use crate::write::{len_prefix, put_str, str_len};
use crate::{DecodeError, EncodeError, PacketId, ProtocolVersion, ReasonCode};

/// UNSUBSCRIBE: one or more topic filters to remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsubscribe {
    /// Packet Identifier.
    pub packet_id: PacketId,
    /// Topic filters (non-empty UTF-8, syntax unchecked), at least one.
    pub filters: Vec<MqttStr>,
    /// UNSUBSCRIBE properties (5.0; empty for 3.x).
    pub properties: UnsubscribeProperties,
}

/// UNSUBACK: in 5.0 one reason code per filter; in 3.x only the packet identifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsubAck {
    /// Packet Identifier of the UNSUBSCRIBE.
    pub packet_id: PacketId,
    /// One code per filter (5.0; empty when decoded from 3.x, dropped when encoded for 3.x).
    pub reason_codes: Vec<ReasonCode>,
    /// Properties (5.0; empty for 3.x).
    pub properties: AckProperties,
}

impl Wire for Unsubscribe {
    const TYPE: PacketType = PacketType::Unsubscribe;
    type Plan = usize;

    fn decode(_: u8, mut body: Reader, protocol: ProtocolVersion) -> Result<Self, DecodeError> {
        let packet_id = body.packet_id(Self::TYPE)?;
        let properties = decode_if_v5(&mut body, protocol, "UNSUBSCRIBE")?;
        let none = DecodeError::NoTopicFilters { packet: Self::TYPE };
        let filters = read_list(&mut body, none, |body| read_filter(body, Self::TYPE))?;
        Ok(Self {
            packet_id,
            filters,
            properties,
        })
    }

    fn measure(&self, protocol: ProtocolVersion) -> Result<(usize, usize), EncodeError> {
        check_filters(self.filters.iter(), Self::TYPE)?;
        let len = 2 + self.filters.iter().map(str_len).sum::<usize>();
        let (block, props) = measure_if_v5(&self.properties, protocol)?;
        Ok((len + block, props))
    }

    fn write(&self, protocol: ProtocolVersion, props: &usize, buf: &mut BytesMut) {
        buf.put_u16(self.packet_id.get());
        if protocol.is_v5() {
            write_block(buf, &self.properties, *props);
        }
        for filter in &self.filters {
            put_str(buf, filter);
        }
    }
}

impl Wire for UnsubAck {
    const TYPE: PacketType = PacketType::UnsubAck;
    type Plan = usize;

    fn decode(_: u8, mut body: Reader, protocol: ProtocolVersion) -> Result<Self, DecodeError> {
        let packet_id = body.packet_id(Self::TYPE)?;
        let mut reason_codes = Vec::new();
        let mut properties = AckProperties::default();
        if protocol.is_v5() {
            properties = decode_properties(&mut body, "UNSUBACK")?;
            let none = DecodeError::NoReasonCodes { packet: Self::TYPE };
            reason_codes = read_list(&mut body, none, |body| read_reason(body, Self::TYPE))?;
        }
        body.finish(Self::TYPE)?;
        Ok(Self {
            packet_id,
            reason_codes,
            properties,
        })
    }

    fn measure(&self, protocol: ProtocolVersion) -> Result<(usize, usize), EncodeError> {
        if !protocol.is_v5() {
            return Ok((2, 0));
        }
        if self.reason_codes.is_empty() {
            return Err(EncodeError::EmptyList { packet: Self::TYPE });
        }
        for &code in &self.reason_codes {
            check_reason(code, Self::TYPE, protocol)?;
        }
        let props = encoded_block_len(&self.properties)?;
        Ok((
            2 + len_prefix(props) + props + self.reason_codes.len(),
            props,
        ))
    }

    fn write(&self, protocol: ProtocolVersion, props: &usize, buf: &mut BytesMut) {
        buf.put_u16(self.packet_id.get());
        if protocol.is_v5() {
            write_block(buf, &self.properties, *props);
            for code in &self.reason_codes {
                buf.put_u8(code.as_u8());
            }
        }
    }
}
