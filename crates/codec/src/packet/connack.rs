//! CONNACK (MQTT 3.1.1 section 3.2, 5.0 section 3.2).

use bytes::{BufMut, BytesMut};

use super::{PacketType, Wire};
use crate::properties::{ConnAckProperties, decode_properties, encoded_block_len, write_block};
use crate::read::Reader;
use crate::write::len_prefix;
use crate::{DecodeError, EncodeError, ProtocolVersion, ReasonCode};

/// The MQTT 3.x CONNACK return codes, in wire order 0..=5, as reason codes.
const V3_RETURN_CODES: [ReasonCode; 6] = [
    ReasonCode::Success,
    ReasonCode::UnsupportedProtocolVersion,
    ReasonCode::ClientIdentifierNotValid,
    ReasonCode::ServerUnavailable,
    ReasonCode::BadUserNameOrPassword,
    ReasonCode::NotAuthorized,
];

/// CONNACK: the server's answer to CONNECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnAck {
    /// Session Present (always false on MQTT 3.1, which has no such flag).
    pub session_present: bool,
    /// Reason code. On 3.x only the six codes that have a return code are representable:
    /// Success, Unsupported Protocol Version, Client Identifier not valid, Server unavailable,
    /// Bad User Name or Password, Not authorized.
    pub reason_code: ReasonCode,
    /// CONNACK properties (5.0; empty for 3.x).
    pub properties: ConnAckProperties,
}

fn v3_return_code(code: ReasonCode) -> Option<u8> {
    V3_RETURN_CODES
        .iter()
        .position(|c| *c == code)
        .map(|index| index as u8)
}

impl Wire for ConnAck {
    const TYPE: PacketType = PacketType::ConnAck;
    type Plan = usize;

    fn decode(_: u8, mut body: Reader, protocol: ProtocolVersion) -> Result<Self, DecodeError> {
        let flags = body.u8("acknowledge flags")?;
        if flags & 0b1111_1110 != 0 {
            return Err(DecodeError::InvalidConnAckFlags { flags });
        }
        let session_present = flags & 1 != 0 && protocol != ProtocolVersion::V3_1;
        let value = body.u8("reason code")?;
        let unknown = DecodeError::UnknownReasonCode {
            packet: Self::TYPE,
            value,
        };
        let (reason_code, properties) = if protocol.is_v5() {
            let code = ReasonCode::from_u8(value).ok_or(unknown)?;
            if !code.is_allowed_in(Self::TYPE) {
                return Err(DecodeError::ReasonCodeNotAllowed {
                    packet: Self::TYPE,
                    code,
                });
            }
            (code, decode_properties(&mut body, "CONNACK")?)
        } else {
            let code = *V3_RETURN_CODES.get(usize::from(value)).ok_or(unknown)?;
            (code, ConnAckProperties::default())
        };
        body.finish(Self::TYPE)?;
        Ok(Self {
            session_present,
            reason_code,
            properties,
        })
    }

    fn measure(&self, protocol: ProtocolVersion) -> Result<(usize, usize), EncodeError> {
        let representable = if protocol.is_v5() {
            self.reason_code.is_allowed_in(Self::TYPE)
        } else {
            v3_return_code(self.reason_code).is_some()
        };
        if !representable {
            return Err(EncodeError::ReasonNotRepresentable {
                packet: Self::TYPE,
                code: self.reason_code,
                protocol,
            });
        }
        if !protocol.is_v5() {
            return Ok((2, 0));
        }
        let props = encoded_block_len(&self.properties)?;
        Ok((2 + len_prefix(props) + props, props))
    }

    fn write(&self, protocol: ProtocolVersion, props: &usize, buf: &mut BytesMut) {
        let session_present = self.session_present && protocol != ProtocolVersion::V3_1;
        buf.put_u8(u8::from(session_present));
        if protocol.is_v5() {
            buf.put_u8(self.reason_code.as_u8());
            write_block(buf, &self.properties, *props);
        } else {
            let code = v3_return_code(self.reason_code).unwrap_or_default();
            buf.put_u8(code);
        }
    }
}
