//! MQTT 5.0 reason codes: every code with its name, whether it is an error, and in which packets
//! it may appear.

use std::fmt;

use crate::packet::PacketType;

macro_rules! reason_codes {
    ($($(#[$doc:meta])* $variant:ident = $value:literal, $name:literal;)*) => {
        /// Every reason code of MQTT 5.0 (section 2.4). The value 0x00 has three names
        /// (Success, Normal disconnection, Granted QoS 0): see [`ReasonCode::name_in`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum ReasonCode {
            $($(#[$doc])* $variant = $value,)*
        }

        impl ReasonCode {
            /// Every reason code, in ascending wire order.
            pub const ALL: &'static [ReasonCode] = &[$(ReasonCode::$variant,)*];

            /// The code for a wire value, `None` for a value MQTT 5.0 does not define.
            pub const fn from_u8(value: u8) -> Option<Self> {
                match value {
                    $($value => Some(Self::$variant),)*
                    _ => None,
                }
            }

            /// The specification's name of this code (for 0x00: "Success").
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }
        }
    };
}

reason_codes! {
    /// 0x00: Success (also Normal disconnection and Granted QoS 0).
    Success = 0x00, "Success";
    /// 0x01: Granted QoS 1 (SUBACK).
    GrantedQoS1 = 0x01, "Granted QoS 1";
    /// 0x02: Granted QoS 2 (SUBACK).
    GrantedQoS2 = 0x02, "Granted QoS 2";
    /// 0x04: Disconnect with Will Message (DISCONNECT from a client).
    DisconnectWithWillMessage = 0x04, "Disconnect with Will Message";
    /// 0x10: No matching subscribers (PUBACK, PUBREC).
    NoMatchingSubscribers = 0x10, "No matching subscribers";
    /// 0x11: No subscription existed (UNSUBACK).
    NoSubscriptionExisted = 0x11, "No subscription existed";
    /// 0x18: Continue authentication (AUTH).
    ContinueAuthentication = 0x18, "Continue authentication";
    /// 0x19: Re-authenticate (AUTH).
    ReAuthenticate = 0x19, "Re-authenticate";
    /// 0x80: Unspecified error.
    UnspecifiedError = 0x80, "Unspecified error";
    /// 0x81: Malformed Packet.
    MalformedPacket = 0x81, "Malformed Packet";
    /// 0x82: Protocol Error.
    ProtocolError = 0x82, "Protocol Error";
    /// 0x83: Implementation specific error.
    ImplementationSpecificError = 0x83, "Implementation specific error";
    /// 0x84: Unsupported Protocol Version.
    UnsupportedProtocolVersion = 0x84, "Unsupported Protocol Version";
    /// 0x85: Client Identifier not valid.
    ClientIdentifierNotValid = 0x85, "Client Identifier not valid";
    /// 0x86: Bad User Name or Password.
    BadUserNameOrPassword = 0x86, "Bad User Name or Password";
    /// 0x87: Not authorized.
    NotAuthorized = 0x87, "Not authorized";
    /// 0x88: Server unavailable.
    ServerUnavailable = 0x88, "Server unavailable";
    /// 0x89: Server busy.
    ServerBusy = 0x89, "Server busy";
    /// 0x8A: Banned.
    Banned = 0x8A, "Banned";
    /// 0x8B: Server shutting down.
    ServerShuttingDown = 0x8B, "Server shutting down";
    /// 0x8C: Bad authentication method.
    BadAuthenticationMethod = 0x8C, "Bad authentication method";
    /// 0x8D: Keep Alive timeout.
    KeepAliveTimeout = 0x8D, "Keep Alive timeout";
    /// 0x8E: Session taken over.
    SessionTakenOver = 0x8E, "Session taken over";
    /// 0x8F: Topic Filter invalid.
    TopicFilterInvalid = 0x8F, "Topic Filter invalid";
    /// 0x90: Topic Name invalid.
    TopicNameInvalid = 0x90, "Topic Name invalid";
    /// 0x91: Packet Identifier in use.
    PacketIdentifierInUse = 0x91, "Packet Identifier in use";
    /// 0x92: Packet Identifier not found.
    PacketIdentifierNotFound = 0x92, "Packet Identifier not found";
    /// 0x93: Receive Maximum exceeded.
    ReceiveMaximumExceeded = 0x93, "Receive Maximum exceeded";
    /// 0x94: Topic Alias invalid.
    TopicAliasInvalid = 0x94, "Topic Alias invalid";
    /// 0x95: Packet too large.
    PacketTooLarge = 0x95, "Packet too large";
    /// 0x96: Message rate too high.
    MessageRateTooHigh = 0x96, "Message rate too high";
    /// 0x97: Quota exceeded.
    QuotaExceeded = 0x97, "Quota exceeded";
    /// 0x98: Administrative action.
    AdministrativeAction = 0x98, "Administrative action";
    /// 0x99: Payload format invalid.
    PayloadFormatInvalid = 0x99, "Payload format invalid";
    /// 0x9A: Retain not supported.
    RetainNotSupported = 0x9A, "Retain not supported";
    /// 0x9B: QoS not supported.
    QoSNotSupported = 0x9B, "QoS not supported";
    /// 0x9C: Use another server.
    UseAnotherServer = 0x9C, "Use another server";
    /// 0x9D: Server moved.
    ServerMoved = 0x9D, "Server moved";
    /// 0x9E: Shared Subscriptions not supported.
    SharedSubscriptionsNotSupported = 0x9E, "Shared Subscriptions not supported";
    /// 0x9F: Connection rate exceeded.
    ConnectionRateExceeded = 0x9F, "Connection rate exceeded";
    /// 0xA0: Maximum connect time.
    MaximumConnectTime = 0xA0, "Maximum connect time";
    /// 0xA1: Subscription Identifiers not supported.
    SubscriptionIdentifiersNotSupported = 0xA1, "Subscription Identifiers not supported";
    /// 0xA2: Wildcard Subscriptions not supported.
    WildcardSubscriptionsNotSupported = 0xA2, "Wildcard Subscriptions not supported";
}

impl ReasonCode {
    /// 0x00 in DISCONNECT.
    pub const NORMAL_DISCONNECTION: Self = Self::Success;
    /// 0x00 in SUBACK.
    pub const GRANTED_QOS_0: Self = Self::Success;

    /// The wire value.
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// Whether this code reports a failure (every value of 0x80 and above).
    pub const fn is_error(self) -> bool {
        self.as_u8() >= 0x80
    }

    /// The name of this code as the specification uses it in `packet` (0x00 is "Normal
    /// disconnection" in DISCONNECT and "Granted QoS 0" in SUBACK).
    pub const fn name_in(self, packet: PacketType) -> &'static str {
        match (self, packet) {
            (Self::Success, PacketType::Disconnect) => "Normal disconnection",
            (Self::Success, PacketType::SubAck) => "Granted QoS 0",
            _ => self.name(),
        }
    }

    /// The granted-QoS code of a SUBACK for `qos`.
    pub const fn granted(qos: crate::QoS) -> Self {
        match qos {
            crate::QoS::AtMostOnce => Self::Success,
            crate::QoS::AtLeastOnce => Self::GrantedQoS1,
            crate::QoS::ExactlyOnce => Self::GrantedQoS2,
        }
    }

    /// Whether MQTT 5.0 allows this code in a packet of type `packet` (section 2.4 and the
    /// reason code table of each packet). Packets without a reason code allow none.
    pub const fn is_allowed_in(self, packet: PacketType) -> bool {
        use ReasonCode as R;
        let code = self;
        match packet {
            PacketType::ConnAck => is_allowed_in_connack(code),
            PacketType::PubAck | PacketType::PubRec => matches!(
                code,
                R::Success
                    | R::NoMatchingSubscribers
                    | R::UnspecifiedError
                    | R::ImplementationSpecificError
                    | R::NotAuthorized
                    | R::TopicNameInvalid
                    | R::PacketIdentifierInUse
                    | R::QuotaExceeded
                    | R::PayloadFormatInvalid
            ),
            PacketType::PubRel | PacketType::PubComp => {
                matches!(code, R::Success | R::PacketIdentifierNotFound)
            }
            PacketType::SubAck => is_allowed_in_suback(code),
            PacketType::UnsubAck => matches!(
                code,
                R::Success
                    | R::NoSubscriptionExisted
                    | R::UnspecifiedError
                    | R::ImplementationSpecificError
                    | R::NotAuthorized
                    | R::TopicFilterInvalid
                    | R::PacketIdentifierInUse
            ),
            PacketType::Disconnect => is_allowed_in_disconnect(code),
            PacketType::Auth => matches!(
                code,
                R::Success | R::ContinueAuthentication | R::ReAuthenticate
            ),
            _ => false,
        }
    }
}

const fn is_allowed_in_connack(code: ReasonCode) -> bool {
    use ReasonCode as R;
    matches!(
        code,
        R::Success
            | R::UnspecifiedError
            | R::MalformedPacket
            | R::ProtocolError
            | R::ImplementationSpecificError
            | R::UnsupportedProtocolVersion
            | R::ClientIdentifierNotValid
            | R::BadUserNameOrPassword
            | R::NotAuthorized
            | R::ServerUnavailable
            | R::ServerBusy
            | R::Banned
            | R::BadAuthenticationMethod
            | R::TopicNameInvalid
            | R::PacketTooLarge
            | R::QuotaExceeded
            | R::PayloadFormatInvalid
            | R::RetainNotSupported
            | R::QoSNotSupported
            | R::UseAnotherServer
            | R::ServerMoved
            | R::ConnectionRateExceeded
    )
}

const fn is_allowed_in_suback(code: ReasonCode) -> bool {
    use ReasonCode as R;
    matches!(
        code,
        R::Success
            | R::GrantedQoS1
            | R::GrantedQoS2
            | R::UnspecifiedError
            | R::ImplementationSpecificError
            | R::NotAuthorized
            | R::TopicFilterInvalid
            | R::PacketIdentifierInUse
            | R::QuotaExceeded
            | R::SharedSubscriptionsNotSupported
            | R::SubscriptionIdentifiersNotSupported
            | R::WildcardSubscriptionsNotSupported
    )
}

const fn is_allowed_in_disconnect(code: ReasonCode) -> bool {
    use ReasonCode as R;
    matches!(
        code,
        R::Success
            | R::DisconnectWithWillMessage
            | R::UnspecifiedError
            | R::MalformedPacket
            | R::ProtocolError
            | R::ImplementationSpecificError
            | R::NotAuthorized
            | R::ServerBusy
            | R::ServerShuttingDown
            | R::KeepAliveTimeout
            | R::SessionTakenOver
            | R::TopicFilterInvalid
            | R::TopicNameInvalid
            | R::ReceiveMaximumExceeded
            | R::TopicAliasInvalid
            | R::PacketTooLarge
            | R::MessageRateTooHigh
            | R::QuotaExceeded
            | R::AdministrativeAction
            | R::PayloadFormatInvalid
            | R::RetainNotSupported
            | R::QoSNotSupported
            | R::UseAnotherServer
            | R::ServerMoved
            | R::SharedSubscriptionsNotSupported
            | R::ConnectionRateExceeded
            | R::MaximumConnectTime
            | R::SubscriptionIdentifiersNotSupported
            | R::WildcardSubscriptionsNotSupported
    )
}

impl Default for ReasonCode {
    /// Success (0x00).
    fn default() -> Self {
        Self::Success
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (0x{:02X})", self.name(), self.as_u8())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_wire_value() {
        assert_eq!(ReasonCode::ALL.len(), 43);
        for &code in ReasonCode::ALL {
            assert_eq!(ReasonCode::from_u8(code.as_u8()), Some(code));
        }
        let defined = (0..=255u8).filter(|v| ReasonCode::from_u8(*v).is_some());
        assert_eq!(defined.count(), ReasonCode::ALL.len());
    }

    #[test]
    fn errors_are_exactly_the_codes_from_0x80() {
        assert!(!ReasonCode::Success.is_error());
        assert!(!ReasonCode::ReAuthenticate.is_error());
        assert!(ReasonCode::UnspecifiedError.is_error());
        assert!(ReasonCode::WildcardSubscriptionsNotSupported.is_error());
    }

    #[test]
    fn zero_has_a_name_per_packet() {
        let zero = ReasonCode::Success;
        assert_eq!(zero.name_in(PacketType::Disconnect), "Normal disconnection");
        assert_eq!(zero.name_in(PacketType::SubAck), "Granted QoS 0");
        assert_eq!(zero.name_in(PacketType::PubAck), "Success");
        assert_eq!(
            ReasonCode::PacketTooLarge.to_string(),
            "Packet too large (0x95)"
        );
    }

    #[test]
    fn allowed_sets_match_the_specification_tables() {
        let count = |packet| {
            ReasonCode::ALL
                .iter()
                .filter(|c| c.is_allowed_in(packet))
                .count()
        };
        assert_eq!(count(PacketType::ConnAck), 22);
        assert_eq!(count(PacketType::PubAck), 9);
        assert_eq!(count(PacketType::PubRec), 9);
        assert_eq!(count(PacketType::PubRel), 2);
        assert_eq!(count(PacketType::PubComp), 2);
        assert_eq!(count(PacketType::SubAck), 12);
        assert_eq!(count(PacketType::UnsubAck), 7);
        assert_eq!(count(PacketType::Disconnect), 29);
        assert_eq!(count(PacketType::Auth), 3);
        assert_eq!(count(PacketType::Publish), 0);
    }
}
