//! CONNECT (MQTT 3.1.1 section 3.1, 5.0 section 3.1). It carries its own protocol version, so
//! it decodes the same whatever version the decoder was configured for.

use bytes::{BufMut, Bytes, BytesMut};

use super::{PacketType, Wire};
use crate::properties::{
    ConnectProperties, WillProperties, decode_properties_into, measure_if_v5, write_block,
};
use crate::read::Reader;
use crate::string::MqttStr;
use crate::write::{self, binary_len, put_binary, put_str, str_len};
use crate::{DecodeError, EncodeError, ProtocolVersion, QoS};

const RESERVED: u8 = 0b0000_0001;
const CLEAN_START: u8 = 0b0000_0010;
const WILL: u8 = 0b0000_0100;
const WILL_QOS_SHIFT: u8 = 3;
const WILL_RETAIN: u8 = 0b0010_0000;
const PASSWORD: u8 = 0b0100_0000;
const USERNAME: u8 = 0b1000_0000;

/// CONNECT: the first packet of every connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connect {
    /// Protocol version requested (from the protocol name and level).
    pub protocol: ProtocolVersion,
    /// Clean Start (5.0) / Clean Session (3.1.1).
    pub clean_start: bool,
    /// Keep Alive in seconds (0: disabled).
    pub keep_alive: u16,
    /// Client Identifier (may be empty where the protocol allows it).
    pub client_id: MqttStr,
    /// The will message, if the Will Flag is set.
    pub will: Option<Will>,
    /// User Name.
    pub username: Option<MqttStr>,
    /// Password (binary data).
    pub password: Option<Bytes>,
    /// CONNECT properties (5.0; empty for 3.x).
    pub properties: ConnectProperties,
}

/// The will message of a CONNECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Will {
    /// Will Topic (a topic name: non-empty, no wildcards).
    pub topic: MqttStr,
    /// Will Payload.
    pub payload: Bytes,
    /// Will QoS.
    pub qos: QoS,
    /// Will Retain.
    pub retain: bool,
    /// Will properties (5.0; empty for 3.x).
    pub properties: WillProperties,
}

impl Will {
    /// Checks the payload against its Payload Format Indicator (0x99 if it says UTF-8 and the
    /// payload is not). Not done while decoding: it costs a pass over the payload.
    pub fn check_payload_format(&self) -> Result<(), DecodeError> {
        crate::packet::publish::check_payload_format(
            self.properties.payload_format,
            &self.payload,
            "will payload",
        )
    }
}

fn read_protocol(body: &mut Reader) -> Result<ProtocolVersion, DecodeError> {
    let is_mqtt = match body.binary_in_place("protocol name")? {
        b"MQTT" => true,
        b"MQIsdp" => false,
        _ => return Err(DecodeError::UnsupportedProtocolName),
    };
    let level = body.u8("protocol level")?;
    match (is_mqtt, level) {
        (true, 4) => Ok(ProtocolVersion::V3_1_1),
        (true, 5) => Ok(ProtocolVersion::V5),
        (false, 3) => Ok(ProtocolVersion::V3_1),
        (_, 3..=5) => Err(DecodeError::ProtocolNameLevelMismatch { level }),
        _ => Err(DecodeError::UnsupportedProtocolLevel { level }),
    }
}

fn check_flags(flags: u8, protocol: ProtocolVersion) -> Result<(), DecodeError> {
    if flags & RESERVED != 0 {
        return Err(DecodeError::ConnectReservedFlag);
    }
    let will_qos = (flags >> WILL_QOS_SHIFT) & 0b11;
    if flags & WILL == 0 && (will_qos != 0 || flags & WILL_RETAIN != 0) {
        return Err(DecodeError::WillFlagsWithoutWill { flags });
    }
    if will_qos == 3 {
        return Err(DecodeError::InvalidQoS { field: "will QoS" });
    }
    if !protocol.is_v5() && flags & PASSWORD != 0 && flags & USERNAME == 0 {
        return Err(DecodeError::PasswordWithoutUsername { protocol });
    }
    Ok(())
}

impl Will {
    /// A will with the QoS and Retain of the connect `flags` and nothing read yet.
    fn from_flags(flags: u8) -> Result<Self, DecodeError> {
        let qos = QoS::from_u8((flags >> WILL_QOS_SHIFT) & 0b11)
            .ok_or(DecodeError::InvalidQoS { field: "will QoS" })?;
        Ok(Self {
            topic: MqttStr::default(),
            payload: Bytes::new(),
            qos,
            retain: flags & WILL_RETAIN != 0,
            properties: WillProperties::default(),
        })
    }
}

/// Reads the will's properties, topic and payload into `will`, where it lies.
fn read_will(
    body: &mut Reader,
    protocol: ProtocolVersion,
    will: &mut Will,
) -> Result<(), DecodeError> {
    if protocol.is_v5() {
        decode_properties_into(body, &mut will.properties, "will")?;
    }
    will.topic = body.topic_name("will topic")?;
    if will.topic.is_empty() {
        return Err(DecodeError::EmptyTopicName {
            field: "will topic",
        });
    }
    will.payload = body.binary("will payload")?;
    Ok(())
}

/// Whether `protocol` refuses an empty client identifier: 3.1 always, 3.1.1 without a clean
/// session, 5.0 never (the server assigns one).
fn rejects_empty_client_id(protocol: ProtocolVersion, clean_start: bool) -> bool {
    match protocol {
        ProtocolVersion::V3_1 => true,
        ProtocolVersion::V3_1_1 => !clean_start,
        ProtocolVersion::V5 => false,
    }
}

fn protocol_name(protocol: ProtocolVersion) -> &'static [u8] {
    match protocol {
        ProtocolVersion::V3_1 => b"MQIsdp",
        ProtocolVersion::V3_1_1 | ProtocolVersion::V5 => b"MQTT",
    }
}

/// Decodes a CONNECT body into a box allocated once the fixed part is read, and fills it in
/// place: the 400-byte packet (and its property sets) are not built apart and then moved.
pub(crate) fn decode_boxed(mut body: Reader) -> Result<Box<Connect>, DecodeError> {
    let protocol = read_protocol(&mut body)?;
    let flags = body.u8("connect flags")?;
    check_flags(flags, protocol)?;
    let keep_alive = body.u16("keep alive")?;
    // Allocated first and written in place (`Box::new` builds the value on the stack and then
    // copies its 400 bytes into the allocation).
    let mut connect = Box::write(
        Box::<Connect>::new_uninit(),
        Connect {
            protocol,
            clean_start: flags & CLEAN_START != 0,
            keep_alive,
            client_id: MqttStr::default(),
            will: None,
            username: None,
            password: None,
            properties: ConnectProperties::default(),
        },
    );
    read_fields(&mut body, flags, &mut connect)?;
    body.finish(PacketType::Connect)?;
    Ok(connect)
}

/// Reads what follows Keep Alive (properties and payload) into `connect`.
fn read_fields(body: &mut Reader, flags: u8, connect: &mut Connect) -> Result<(), DecodeError> {
    let protocol = connect.protocol;
    if protocol.is_v5() {
        decode_properties_into(body, &mut connect.properties, "CONNECT")?;
    }
    connect.client_id = body.string("client identifier")?;
    let clean_start = connect.clean_start;
    if connect.client_id.is_empty() && rejects_empty_client_id(protocol, clean_start) {
        return Err(DecodeError::ClientIdRejected {
            protocol,
            clean_start,
        });
    }
    if flags & WILL != 0 {
        let will = connect.will.insert(Will::from_flags(flags)?);
        read_will(body, protocol, will)?;
    }
    if flags & USERNAME != 0 {
        connect.username = Some(body.string("user name")?);
    }
    if flags & PASSWORD != 0 {
        connect.password = Some(body.binary("password")?);
    }
    Ok(())
}

/// Lengths of the two property blocks, computed by `measure`.
pub(crate) struct ConnectPlan {
    properties: usize,
    will_properties: usize,
}

impl Connect {
    fn connect_flags(&self) -> u8 {
        let mut flags = 0;
        if self.clean_start {
            flags |= CLEAN_START;
        }
        if let Some(will) = &self.will {
            flags |= WILL | (will.qos.as_u8() << WILL_QOS_SHIFT);
            if will.retain {
                flags |= WILL_RETAIN;
            }
        }
        if self.password.is_some() {
            flags |= PASSWORD;
        }
        if self.username.is_some() {
            flags |= USERNAME;
        }
        flags
    }

    fn measure_will(will: &Will, protocol: ProtocolVersion) -> Result<(usize, usize), EncodeError> {
        if will.topic.is_empty() || will.topic.has_wildcard() {
            return Err(EncodeError::InvalidTopicName {
                field: "will topic",
            });
        }
        let len = str_len(&will.topic) + binary_len("will payload", &will.payload)?;
        let (block, props) = measure_if_v5(&will.properties, protocol)?;
        Ok((len + block, props))
    }
}

impl Wire for Connect {
    const TYPE: PacketType = PacketType::Connect;
    type Plan = ConnectPlan;

    fn decode(_: u8, body: Reader, _: ProtocolVersion) -> Result<Self, DecodeError> {
        decode_boxed(body).map(|connect| *connect)
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
