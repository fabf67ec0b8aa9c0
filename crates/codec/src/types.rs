//! Protocol-level newtypes shared by every crate: QoS, packet identifiers, protocol versions and
//! subscription options.

use std::fmt;
use std::num::NonZeroU16;

/// Quality of service of a PUBLISH or a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum QoS {
    /// At most once.
    #[default]
    AtMostOnce = 0,
    /// At least once.
    AtLeastOnce = 1,
    /// Exactly once.
    ExactlyOnce = 2,
}

impl QoS {
    /// The QoS for a wire value, `None` for 3 and above.
    #[inline]
    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            0 => Some(Self::AtMostOnce),
            1 => Some(Self::AtLeastOnce),
            2 => Some(Self::ExactlyOnce),
            _ => None,
        }
    }

    /// The wire value.
    #[inline]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }
}

/// A non-zero packet identifier (MQTT forbids 0 where an identifier is required).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PacketId(NonZeroU16);

impl PacketId {
    /// The identifier for a wire value, `None` for 0.
    #[inline]
    pub const fn new(value: u16) -> Option<Self> {
        match NonZeroU16::new(value) {
            Some(v) => Some(Self(v)),
            None => None,
        }
    }

    /// The wire value.
    #[inline]
    pub const fn get(self) -> u16 {
        self.0.get()
    }

    /// The identifier after this one, wrapping from 65535 to 1.
    pub const fn next(self) -> Self {
        match NonZeroU16::new(self.0.get().wrapping_add(1)) {
            Some(v) => Self(v),
            None => Self(NonZeroU16::MIN),
        }
    }
}

impl fmt::Display for PacketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The protocol level of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolVersion {
    /// MQTT 3.1, protocol name "MQIsdp", level 3.
    V3_1,
    /// MQTT 3.1.1, protocol name "MQTT", level 4.
    V3_1_1,
    /// MQTT 5.0, protocol name "MQTT", level 5.
    V5,
}

impl ProtocolVersion {
    /// The protocol level byte of CONNECT.
    pub const fn level(self) -> u8 {
        match self {
            Self::V3_1 => 3,
            Self::V3_1_1 => 4,
            Self::V5 => 5,
        }
    }

    /// Whether the wire format carries 5.0 properties and reason codes.
    pub const fn is_v5(self) -> bool {
        matches!(self, Self::V5)
    }
}

/// When retained messages are sent for a new subscription (MQTT 5.0 option, 3.1.1 behaves as
/// `SendAtSubscribe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum RetainHandling {
    /// Send retained messages at the time of the subscribe.
    #[default]
    SendAtSubscribe = 0,
    /// Send retained messages only if the subscription did not exist before.
    SendIfNew = 1,
    /// Never send retained messages for this subscribe.
    DoNotSend = 2,
}

impl RetainHandling {
    /// The option for a wire value, `None` for 3.
    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            0 => Some(Self::SendAtSubscribe),
            1 => Some(Self::SendIfNew),
            2 => Some(Self::DoNotSend),
            _ => None,
        }
    }
}

/// The options of one topic filter in a SUBSCRIBE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SubscriptionOptions {
    /// Maximum QoS the broker may use for messages on this subscription.
    pub qos: QoS,
    /// Do not forward messages published by this same client (5.0).
    pub no_local: bool,
    /// Keep the RETAIN flag of forwarded messages as published (5.0).
    pub retain_as_published: bool,
    /// When retained messages are sent for this subscription (5.0).
    pub retain_handling: RetainHandling,
}

/// A subscription identifier (5.0): 1 to 268,435,455.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubscriptionId(std::num::NonZeroU32);

impl SubscriptionId {
    /// The largest identifier a variable byte integer can carry.
    pub const MAX: u32 = 268_435_455;

    /// The identifier for a wire value, `None` for 0 or above [`Self::MAX`].
    pub const fn new(value: u32) -> Option<Self> {
        if value > Self::MAX {
            return None;
        }
        match std::num::NonZeroU32::new(value) {
            Some(v) => Some(Self(v)),
            None => None,
        }
    }

    /// The wire value.
    pub const fn get(self) -> u32 {
        self.0.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_wire_values() {
        assert_eq!(QoS::from_u8(2), Some(QoS::ExactlyOnce));
        assert_eq!(QoS::from_u8(3), None);
        assert!(QoS::AtMostOnce < QoS::ExactlyOnce);
    }

    #[test]
    fn packet_id_rejects_zero_and_wraps() {
        assert_eq!(PacketId::new(0), None);
        let max = PacketId::new(u16::MAX).expect("non-zero");
        assert_eq!(max.next().get(), 1);
    }

    #[test]
    fn subscription_id_range() {
        assert!(SubscriptionId::new(0).is_none());
        assert!(SubscriptionId::new(SubscriptionId::MAX).is_some());
        assert!(SubscriptionId::new(SubscriptionId::MAX + 1).is_none());
    }
}
