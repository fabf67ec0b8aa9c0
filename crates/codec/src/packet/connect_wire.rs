//! How a [`Connect`] goes on the wire: encoded from its fields, decoded through
//! [`ConnectFrame`] (apart from `connect.rs` and `connect_frame.rs`, which this joins).

use bytes::{BufMut, BytesMut};

use super::connect_frame::decode_frame;
use super::{Connect, PacketType, Wire};
use crate::properties::{measure_if_v5, write_block};
use crate::read::Reader;
use crate::write::{self, binary_len, put_binary, put_str, str_len};
use crate::{DecodeError, EncodeError, ProtocolVersion};

fn protocol_name(protocol: ProtocolVersion) -> &'static [u8] {
    match protocol {
        ProtocolVersion::V3_1 => b"MQIsdp",
        ProtocolVersion::V3_1_1 | ProtocolVersion::V5 => b"MQTT",
    }
}

/// Lengths of the two property blocks, computed by `measure`.
pub(crate) struct ConnectPlan {
    properties: usize,
    will_properties: usize,
}

impl Wire for Connect {
    const TYPE: PacketType = PacketType::Connect;
    type Plan = ConnectPlan;

    fn decode(_: u8, body: Reader, _: ProtocolVersion) -> Result<Self, DecodeError> {
        decode_frame(body).map(|frame| frame.to_connect())
    }

    fn measure(&self, _: ProtocolVersion) -> Result<(usize, ConnectPlan), EncodeError> {
        let v5 = self.protocol.is_v5();
        if !v5 && self.password.is_some() && self.username.is_none() {
            return Err(EncodeError::PasswordWithoutUsername {
                protocol: self.protocol,
            });
        }
        let name = protocol_name(self.protocol);
        let (block, properties) = measure_if_v5(&self.properties, self.protocol)?;
        let mut len = 2 + name.len() + 1 + 1 + 2 + str_len(&self.client_id) + block;
        let mut plan = ConnectPlan {
            properties,
            will_properties: 0,
        };
        if let Some(will) = &self.will {
            let (will_len, will_props) = Self::measure_will(will, self.protocol)?;
            len += will_len;
            plan.will_properties = will_props;
        }
        len += self.username.as_ref().map_or(0, str_len);
        if let Some(password) = &self.password {
            len += binary_len("password", password)?;
        }
        Ok((len, plan))
    }

    fn write(&self, _: ProtocolVersion, plan: &ConnectPlan, buf: &mut BytesMut) {
        let v5 = self.protocol.is_v5();
        put_binary(buf, protocol_name(self.protocol));
        buf.put_u8(self.protocol.level());
        buf.put_u8(self.connect_flags());
        buf.put_u16(self.keep_alive);
        if v5 {
            write_block(buf, &self.properties, plan.properties);
        }
        put_str(buf, &self.client_id);
        if let Some(will) = &self.will {
            if v5 {
                write_block(buf, &will.properties, plan.will_properties);
            }
            put_str(buf, &will.topic);
            put_binary(buf, &will.payload);
        }
        if let Some(username) = &self.username {
            put_str(buf, username);
        }
        if let Some(password) = &self.password {
            write::put_binary(buf, password);
        }
    }
}
