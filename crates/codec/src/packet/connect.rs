//! CONNECT (MQTT 3.1.1 section 3.1, 5.0 section 3.1). It carries its own protocol version, so
//! it decodes the same whatever version the decoder was configured for.

use bytes::Bytes;

use crate::properties::{ConnectProperties, WillProperties, measure_if_v5};
use crate::read::Reader;
use crate::string::MqttStr;
use crate::write::{binary_len, str_len};
use crate::{DecodeError, EncodeError, ProtocolVersion, QoS};

const RESERVED: u8 = 0b0000_0001;
pub(super) const CLEAN_START: u8 = 0b0000_0010;
pub(super) const WILL: u8 = 0b0000_0100;
pub(super) const WILL_QOS_SHIFT: u8 = 3;
pub(super) const WILL_RETAIN: u8 = 0b0010_0000;
pub(super) const PASSWORD: u8 = 0b0100_0000;
pub(super) const USERNAME: u8 = 0b1000_0000;

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

pub(super) fn read_protocol(body: &mut Reader) -> Result<ProtocolVersion, DecodeError> {
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

pub(super) fn check_flags(flags: u8, protocol: ProtocolVersion) -> Result<(), DecodeError> {
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

/// Whether `protocol` refuses an empty client identifier: 3.1 always, 3.1.1 without a clean
/// session, 5.0 never (the server assigns one).
pub(super) fn rejects_empty_client_id(protocol: ProtocolVersion, clean_start: bool) -> bool {
    match protocol {
        ProtocolVersion::V3_1 => true,
        ProtocolVersion::V3_1_1 => !clean_start,
        ProtocolVersion::V5 => false,
    }
}

impl Connect {
    pub(super) fn connect_flags(&self) -> u8 {
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

    pub(super) fn measure_will(
        will: &Will,
        protocol: ProtocolVersion,
    ) -> Result<(usize, usize), EncodeError> {
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
