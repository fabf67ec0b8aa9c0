//! Decode and encode errors. Every decode error maps to the MQTT reason code a receiver reports
//! for it (in CONNACK before the session exists, in DISCONNECT after).

use crate::packet::PacketType;
use crate::properties::PropertyId;
use crate::{ProtocolVersion, ReasonCode};

/// Why a byte stream is not a valid MQTT packet. Decoding errors end the connection: the
/// receiver sends [`DecodeError::reason_code`] where the protocol lets it, then closes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The remaining length has a fifth continuation byte.
    #[error("remaining length is longer than 4 bytes")]
    MalformedRemainingLength,
    /// A variable byte integer inside the packet is longer than 4 bytes.
    #[error("variable byte integer in {field} is longer than 4 bytes")]
    MalformedVariableByteInteger {
        /// The field holding the integer.
        field: &'static str,
    },
    /// The whole packet (fixed header included) is larger than the configured maximum.
    #[error("packet of {size} bytes exceeds the maximum packet size of {max} bytes")]
    PacketTooLarge {
        /// Size of the packet announced by its fixed header.
        size: u64,
        /// The limit in force.
        max: u32,
    },
    /// Packet type 0, or 15 (AUTH) in MQTT 3.1/3.1.1.
    #[error("packet type {value} is reserved in {protocol:?}")]
    ReservedPacketType {
        /// The packet type nibble.
        value: u8,
        /// The protocol the packet was decoded for.
        protocol: ProtocolVersion,
    },
    /// The fixed header flags differ from the ones the packet type requires.
    #[error("fixed header flags {flags:#06b} are invalid for {packet}")]
    InvalidFixedHeaderFlags {
        /// The packet type.
        packet: PacketType,
        /// The four flag bits.
        flags: u8,
    },
    /// QoS 3 in a PUBLISH or a will.
    #[error("QoS 3 in {field}")]
    InvalidQoS {
        /// Where the QoS was.
        field: &'static str,
    },
    /// DUP set on a QoS 0 PUBLISH.
    #[error("DUP flag set on a QoS 0 PUBLISH")]
    DupWithQoS0,
    /// The packet ends before a field does (the packet is shorter than its contents).
    #[error("packet ends inside {field}")]
    UnexpectedEnd {
        /// The field being read.
        field: &'static str,
    },
    /// Bytes are left over after the last field (the packet is longer than its contents).
    #[error("{packet} has {extra} bytes after its last field")]
    TrailingBytes {
        /// The packet type.
        packet: PacketType,
        /// How many bytes are left over.
        extra: usize,
    },
    /// A string is not well-formed UTF-8.
    #[error("{field} is not well-formed UTF-8")]
    InvalidUtf8 {
        /// The field holding the string.
        field: &'static str,
    },
    /// A string holds U+0000.
    #[error("{field} contains U+0000")]
    NullCharacter {
        /// The field holding the string.
        field: &'static str,
    },
    /// A string built by the application is longer than 65,535 bytes.
    #[error("string of {len} bytes is longer than 65535 bytes")]
    StringTooLong {
        /// Its length.
        len: usize,
    },
    /// A packet identifier is 0 where one is required.
    #[error("packet identifier 0 in {packet}")]
    ZeroPacketId {
        /// The packet type.
        packet: PacketType,
    },
    /// A topic name (PUBLISH, will, response topic) holds `+` or `#`.
    #[error("{field} contains a wildcard")]
    WildcardInTopicName {
        /// The field holding the topic.
        field: &'static str,
    },
    /// An empty topic name (5.0: without a topic alias).
    #[error("empty {field}")]
    EmptyTopicName {
        /// The field holding the topic.
        field: &'static str,
    },
    /// An empty topic filter in SUBSCRIBE or UNSUBSCRIBE.
    #[error("empty topic filter in {packet}")]
    EmptyTopicFilter {
        /// The packet type.
        packet: PacketType,
    },
    /// SUBSCRIBE or UNSUBSCRIBE without any topic filter.
    #[error("{packet} without topic filters")]
    NoTopicFilters {
        /// The packet type.
        packet: PacketType,
    },
    /// SUBACK or 5.0 UNSUBACK without any reason code.
    #[error("{packet} without reason codes")]
    NoReasonCodes {
        /// The packet type.
        packet: PacketType,
    },
    /// Subscription options with reserved bits set or QoS 3.
    #[error("invalid subscription options {options:#010b}")]
    InvalidSubscriptionOptions {
        /// The options byte.
        options: u8,
    },
    /// Retain Handling 3 in subscription options.
    #[error("retain handling 3 in subscription options")]
    InvalidRetainHandling,
    /// CONNECT names a protocol other than "MQTT" or "MQIsdp".
    #[error("unsupported protocol name")]
    UnsupportedProtocolName,
    /// CONNECT names a protocol level this codec does not speak.
    #[error("unsupported protocol level {level}")]
    UnsupportedProtocolLevel {
        /// The level byte.
        level: u8,
    },
    /// "MQTT" with level 3, or "MQIsdp" with a level other than 3.
    #[error("protocol name does not match protocol level {level}")]
    ProtocolNameLevelMismatch {
        /// The level byte.
        level: u8,
    },
    /// The reserved bit of the CONNECT flags is set.
    #[error("reserved CONNECT flag is set")]
    ConnectReservedFlag,
    /// Will QoS or Will Retain set while the Will Flag is 0.
    #[error("will QoS or retain set without the will flag (flags {flags:#010b})")]
    WillFlagsWithoutWill {
        /// The CONNECT flags byte.
        flags: u8,
    },
    /// Password flag without user name flag (MQTT 3.1 and 3.1.1).
    #[error("password without user name in {protocol:?}")]
    PasswordWithoutUsername {
        /// The protocol of the CONNECT.
        protocol: ProtocolVersion,
    },
    /// An empty client identifier that the protocol does not allow (3.1: always; 3.1.1: with
    /// clean session 0).
    #[error("empty client identifier not allowed in {protocol:?} with clean session {clean_start}")]
    ClientIdRejected {
        /// The protocol of the CONNECT.
        protocol: ProtocolVersion,
        /// The clean session flag.
        clean_start: bool,
    },
    /// A property identifier MQTT 5.0 does not define.
    #[error("unknown property identifier {id}")]
    UnknownProperty {
        /// The identifier.
        id: u32,
    },
    /// A property the packet does not allow.
    #[error("property {id:?} is not allowed in {context}")]
    PropertyNotAllowed {
        /// The property.
        id: PropertyId,
        /// The packet (or "will") it appeared in.
        context: &'static str,
    },
    /// A property that may appear once appears twice.
    #[error("property {id:?} appears more than once")]
    DuplicateProperty {
        /// The property.
        id: PropertyId,
    },
    /// A property value outside its range (receive maximum 0, maximum packet size 0,
    /// subscription identifier 0, a boolean byte above 1, ...).
    #[error("property {id:?} has invalid value {value}")]
    InvalidPropertyValue {
        /// The property.
        id: PropertyId,
        /// The value received.
        value: u32,
    },
    /// Topic Alias 0.
    #[error("topic alias 0")]
    TopicAliasZero,
    /// Authentication Data without Authentication Method.
    #[error("authentication data without authentication method in {context}")]
    AuthDataWithoutMethod {
        /// The packet.
        context: &'static str,
    },
    /// A reason code byte MQTT 5.0 does not define (or a 3.x return code out of range).
    #[error("unknown reason code {value:#04x} in {packet}")]
    UnknownReasonCode {
        /// The packet type.
        packet: PacketType,
        /// The byte.
        value: u8,
    },
    /// A defined reason code that this packet type does not allow.
    #[error("reason code {code} is not allowed in {packet}")]
    ReasonCodeNotAllowed {
        /// The packet type.
        packet: PacketType,
        /// The code.
        code: ReasonCode,
    },
    /// CONNACK acknowledge flags with reserved bits set.
    #[error("reserved CONNACK flags set ({flags:#010b})")]
    InvalidConnAckFlags {
        /// The flags byte.
        flags: u8,
    },
    /// Payload Format Indicator 1 with a payload that is not UTF-8.
    #[error("payload format indicator says UTF-8 but {field} is not")]
    PayloadFormatInvalid {
        /// The payload checked.
        field: &'static str,
    },
}

impl DecodeError {
    /// The reason code a receiver reports for this error.
    pub const fn reason_code(&self) -> ReasonCode {
        match self {
            Self::PacketTooLarge { .. } => ReasonCode::PacketTooLarge,
            Self::UnsupportedProtocolName
            | Self::UnsupportedProtocolLevel { .. }
            | Self::ProtocolNameLevelMismatch { .. } => ReasonCode::UnsupportedProtocolVersion,
            Self::ClientIdRejected { .. } => ReasonCode::ClientIdentifierNotValid,
            Self::PayloadFormatInvalid { .. } => ReasonCode::PayloadFormatInvalid,
            Self::WildcardInTopicName { .. } => ReasonCode::TopicNameInvalid,
            Self::TopicAliasZero => ReasonCode::TopicAliasInvalid,
            Self::ZeroPacketId { .. }
            | Self::EmptyTopicName { .. }
            | Self::EmptyTopicFilter { .. }
            | Self::NoTopicFilters { .. }
            | Self::NoReasonCodes { .. }
            | Self::InvalidRetainHandling
            | Self::DuplicateProperty { .. }
            | Self::InvalidPropertyValue { .. }
            | Self::AuthDataWithoutMethod { .. }
            | Self::ReasonCodeNotAllowed { .. } => ReasonCode::ProtocolError,
            Self::MalformedRemainingLength
            | Self::MalformedVariableByteInteger { .. }
            | Self::ReservedPacketType { .. }
            | Self::InvalidFixedHeaderFlags { .. }
            | Self::InvalidQoS { .. }
            | Self::DupWithQoS0
            | Self::UnexpectedEnd { .. }
            | Self::TrailingBytes { .. }
            | Self::InvalidUtf8 { .. }
            | Self::NullCharacter { .. }
            | Self::StringTooLong { .. }
            | Self::InvalidSubscriptionOptions { .. }
            | Self::ConnectReservedFlag
            | Self::WillFlagsWithoutWill { .. }
            | Self::PasswordWithoutUsername { .. }
            | Self::UnknownProperty { .. }
            | Self::PropertyNotAllowed { .. }
            | Self::UnknownReasonCode { .. }
            | Self::InvalidConnAckFlags { .. } => ReasonCode::MalformedPacket,
        }
    }
}

/// Why a packet cannot be encoded. Encoding checks everything before it writes: on error the
/// output buffer is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The remaining length would exceed 268,435,455 bytes.
    #[error("remaining length {remaining_length} exceeds 268435455")]
    PacketTooLarge {
        /// The remaining length the packet would have.
        remaining_length: usize,
    },
    /// Binary data longer than its two-byte length prefix can carry.
    #[error("{field} of {len} bytes is longer than 65535 bytes")]
    BinaryTooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// A PUBLISH with QoS 0 and a packet identifier, or QoS 1/2 without one.
    #[error("packet identifier presence does not match QoS {qos:?}")]
    PacketIdMismatch {
        /// The QoS of the PUBLISH.
        qos: crate::QoS,
    },
    /// DUP set on a QoS 0 PUBLISH.
    #[error("DUP flag set on a QoS 0 PUBLISH")]
    DupWithQoS0,
    /// A packet type the protocol version does not have (AUTH before 5.0).
    #[error("{packet} does not exist in {protocol:?}")]
    NotInProtocol {
        /// The packet type.
        packet: PacketType,
        /// The protocol version.
        protocol: ProtocolVersion,
    },
    /// A reason code the packet type (or the 3.x return codes) cannot carry.
    #[error("reason code {code} cannot be sent in {packet} of {protocol:?}")]
    ReasonNotRepresentable {
        /// The packet type.
        packet: PacketType,
        /// The code.
        code: ReasonCode,
        /// The protocol version.
        protocol: ProtocolVersion,
    },
    /// A PUBLISH or will topic name with a wildcard, or empty without a topic alias.
    #[error("invalid topic name for {field}")]
    InvalidTopicName {
        /// The field.
        field: &'static str,
    },
    /// SUBSCRIBE/UNSUBSCRIBE without filters, SUBACK/UNSUBACK without reason codes, or an
    /// empty topic filter.
    #[error("{packet} needs at least one non-empty entry")]
    EmptyList {
        /// The packet type.
        packet: PacketType,
    },
    /// Password without user name, which MQTT 3.1/3.1.1 cannot express.
    #[error("password without user name in {protocol:?}")]
    PasswordWithoutUsername {
        /// The protocol version.
        protocol: ProtocolVersion,
    },
}
