//! [`PropertyId`]: every MQTT 5.0 property identifier and its wire value.

macro_rules! property_ids {
    ($($(#[$doc:meta])* $variant:ident = $value:literal,)*) => {
        /// Every property identifier of MQTT 5.0 (section 2.2.2.2).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum PropertyId {
            $($(#[$doc])* $variant = $value,)*
        }

        impl PropertyId {
            /// Every property identifier, in ascending order.
            pub const ALL: &'static [PropertyId] = &[$(PropertyId::$variant,)*];

            /// The identifier for a wire value, `None` if MQTT 5.0 does not define it.
            pub const fn from_u32(value: u32) -> Option<Self> {
                match value {
                    $($value => Some(Self::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

property_ids! {
    /// Byte; PUBLISH, will.
    PayloadFormatIndicator = 0x01,
    /// Four byte integer; PUBLISH, will.
    MessageExpiryInterval = 0x02,
    /// UTF-8 string; PUBLISH, will.
    ContentType = 0x03,
    /// UTF-8 string; PUBLISH, will.
    ResponseTopic = 0x08,
    /// Binary data; PUBLISH, will.
    CorrelationData = 0x09,
    /// Variable byte integer; PUBLISH (repeatable), SUBSCRIBE.
    SubscriptionIdentifier = 0x0B,
    /// Four byte integer; CONNECT, CONNACK, DISCONNECT.
    SessionExpiryInterval = 0x11,
    /// UTF-8 string; CONNACK.
    AssignedClientIdentifier = 0x12,
    /// Two byte integer; CONNACK.
    ServerKeepAlive = 0x13,
    /// UTF-8 string; CONNECT, CONNACK, AUTH.
    AuthenticationMethod = 0x15,
    /// Binary data; CONNECT, CONNACK, AUTH.
    AuthenticationData = 0x16,
    /// Byte; CONNECT.
    RequestProblemInformation = 0x17,
    /// Four byte integer; will.
    WillDelayInterval = 0x18,
    /// Byte; CONNECT.
    RequestResponseInformation = 0x19,
    /// UTF-8 string; CONNACK.
    ResponseInformation = 0x1A,
    /// UTF-8 string; CONNACK, DISCONNECT.
    ServerReference = 0x1C,
    /// UTF-8 string; CONNACK, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK, UNSUBACK, DISCONNECT, AUTH.
    ReasonString = 0x1F,
    /// Two byte integer; CONNECT, CONNACK.
    ReceiveMaximum = 0x21,
    /// Two byte integer; CONNECT, CONNACK.
    TopicAliasMaximum = 0x22,
    /// Two byte integer; PUBLISH.
    TopicAlias = 0x23,
    /// Byte; CONNACK.
    MaximumQoS = 0x24,
    /// Byte; CONNACK.
    RetainAvailable = 0x25,
    /// UTF-8 string pair; every packet with properties, repeatable.
    UserProperty = 0x26,
    /// Four byte integer; CONNECT, CONNACK.
    MaximumPacketSize = 0x27,
    /// Byte; CONNACK.
    WildcardSubscriptionAvailable = 0x28,
    /// Byte; CONNACK.
    SubscriptionIdentifierAvailable = 0x29,
    /// Byte; CONNACK.
    SharedSubscriptionAvailable = 0x2A,
}
