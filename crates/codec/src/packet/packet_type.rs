//! [`PacketType`]: the control packet types, their names and required fixed header flags.

use std::fmt;

/// The control packet types (the high nibble of the first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// Client request to connect.
    Connect = 1,
    /// Connect acknowledgement.
    ConnAck = 2,
    /// Publish message.
    Publish = 3,
    /// Publish acknowledgement (QoS 1).
    PubAck = 4,
    /// Publish received (QoS 2, part 1).
    PubRec = 5,
    /// Publish release (QoS 2, part 2).
    PubRel = 6,
    /// Publish complete (QoS 2, part 3).
    PubComp = 7,
    /// Subscribe request.
    Subscribe = 8,
    /// Subscribe acknowledgement.
    SubAck = 9,
    /// Unsubscribe request.
    Unsubscribe = 10,
    /// Unsubscribe acknowledgement.
    UnsubAck = 11,
    /// Ping request.
    PingReq = 12,
    /// Ping response.
    PingResp = 13,
    /// Disconnect notification.
    Disconnect = 14,
    /// Authentication exchange (5.0 only).
    Auth = 15,
}

impl PacketType {
    /// The type for the high nibble of a first byte, `None` for the reserved 0.
    pub const fn from_nibble(value: u8) -> Option<Self> {
        Some(match value {
            1 => Self::Connect,
            2 => Self::ConnAck,
            3 => Self::Publish,
            4 => Self::PubAck,
            5 => Self::PubRec,
            6 => Self::PubRel,
            7 => Self::PubComp,
            8 => Self::Subscribe,
            9 => Self::SubAck,
            10 => Self::Unsubscribe,
            11 => Self::UnsubAck,
            12 => Self::PingReq,
            13 => Self::PingResp,
            14 => Self::Disconnect,
            15 => Self::Auth,
            _ => return None,
        })
    }

    /// The specification's name: "CONNECT", "PUBACK", ...
    pub const fn name(self) -> &'static str {
        match self {
            Self::Connect => "CONNECT",
            Self::ConnAck => "CONNACK",
            Self::Publish => "PUBLISH",
            Self::PubAck => "PUBACK",
            Self::PubRec => "PUBREC",
            Self::PubRel => "PUBREL",
            Self::PubComp => "PUBCOMP",
            Self::Subscribe => "SUBSCRIBE",
            Self::SubAck => "SUBACK",
            Self::Unsubscribe => "UNSUBSCRIBE",
            Self::UnsubAck => "UNSUBACK",
            Self::PingReq => "PINGREQ",
            Self::PingResp => "PINGRESP",
            Self::Disconnect => "DISCONNECT",
            Self::Auth => "AUTH",
        }
    }

    /// The fixed header flags this type requires; `None` for PUBLISH, whose flags carry DUP,
    /// QoS and RETAIN.
    pub const fn required_flags(self) -> Option<u8> {
        match self {
            Self::Publish => None,
            Self::PubRel | Self::Subscribe | Self::Unsubscribe => Some(0b0010),
            _ => Some(0),
        }
    }
}

impl fmt::Display for PacketType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
