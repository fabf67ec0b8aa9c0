//! DISCONNECT and AUTH: in 5.0 a reason code and properties, both omitted on the wire when they
//! are Success and empty. 3.x DISCONNECT is empty; AUTH exists only in 5.0.

use bytes::{BufMut, BytesMut};

use super::ack::{check_reason, read_reason};
use super::{PacketType, Wire};
use crate::properties::{
    AuthProperties, DisconnectProperties, PropertySet, decode_properties, encoded_block_len,
    write_block,
};
use crate::read::Reader;
use crate::write::len_prefix;
use crate::{DecodeError, EncodeError, ProtocolVersion, ReasonCode};

/// DISCONNECT: the last packet of a connection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Disconnect {
    /// Reason code (5.0; Normal disconnection for 3.x, whose encoding drops it).
    pub reason_code: ReasonCode,
    /// Properties (5.0; empty for 3.x).
    pub properties: DisconnectProperties,
}

/// AUTH: an enhanced authentication exchange step (5.0 only).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Auth {
    /// Reason code: Success, Continue authentication or Re-authenticate.
    pub reason_code: ReasonCode,
    /// Properties.
    pub properties: AuthProperties,
}

/// Reads the optional reason code and properties of DISCONNECT/AUTH.
fn decode_tail<T: PropertySet>(
    packet: PacketType,
    mut body: Reader,
) -> Result<(ReasonCode, T), DecodeError> {
    let mut code = ReasonCode::Success;
    let mut properties = T::default();
    if !body.is_empty() {
        code = read_reason(&mut body, packet)?;
        if !body.is_empty() {
            properties = decode_properties(&mut body, packet.name())?;
        }
    }
    body.finish(packet)?;
    Ok((code, properties))
}

/// The remaining length and properties length of DISCONNECT/AUTH in 5.0.
fn measure_tail<T: PropertySet + PartialEq>(
    packet: PacketType,
    code: ReasonCode,
    properties: &T,
) -> Result<(usize, (usize, usize)), EncodeError> {
    check_reason(code, packet, ProtocolVersion::V5)?;
    if *properties == T::default() {
        let len = usize::from(code != ReasonCode::Success);
        return Ok((len, (len, 0)));
    }
    let props = encoded_block_len(properties)?;
    let len = 1 + len_prefix(props) + props;
    Ok((len, (len, props)))
}

fn write_tail<T: PropertySet>(
    code: ReasonCode,
    properties: &T,
    (remaining, props): (usize, usize),
    buf: &mut BytesMut,
) {
    if remaining > 0 {
        buf.put_u8(code.as_u8());
    }
    if remaining > 1 {
        write_block(buf, properties, props);
    }
}

impl Wire for Disconnect {
    const TYPE: PacketType = PacketType::Disconnect;
    type Plan = (usize, usize);

    fn decode(_: u8, body: Reader, protocol: ProtocolVersion) -> Result<Self, DecodeError> {
        if !protocol.is_v5() {
            body.finish(Self::TYPE)?;
            return Ok(Self::default());
        }
        let (reason_code, properties) = decode_tail(Self::TYPE, body)?;
        Ok(Self {
            reason_code,
            properties,
        })
    }

    fn measure(&self, protocol: ProtocolVersion) -> Result<(usize, (usize, usize)), EncodeError> {
        if !protocol.is_v5() {
            return Ok((0, (0, 0)));
        }
        measure_tail(Self::TYPE, self.reason_code, &self.properties)
    }

    fn write(&self, _: ProtocolVersion, plan: &(usize, usize), buf: &mut BytesMut) {
        write_tail(self.reason_code, &self.properties, *plan, buf);
    }
}

impl Wire for Auth {
    const TYPE: PacketType = PacketType::Auth;
    type Plan = (usize, usize);

    fn decode(_: u8, body: Reader, _: ProtocolVersion) -> Result<Self, DecodeError> {
        let (reason_code, properties) = decode_tail(Self::TYPE, body)?;
        Ok(Self {
            reason_code,
            properties,
        })
    }

    fn measure(&self, protocol: ProtocolVersion) -> Result<(usize, (usize, usize)), EncodeError> {
        if !protocol.is_v5() {
            return Err(EncodeError::NotInProtocol {
                packet: Self::TYPE,
                protocol,
            });
        }
        measure_tail(Self::TYPE, self.reason_code, &self.properties)
    }

    fn write(&self, _: ProtocolVersion, plan: &(usize, usize), buf: &mut BytesMut) {
        write_tail(self.reason_code, &self.properties, *plan, buf);
    }
}
