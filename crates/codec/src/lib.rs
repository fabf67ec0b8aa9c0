//! MQTT 3.1, 3.1.1 and 5.0 packets over `bytes`: decoding, encoding and the protocol newtypes.
//!
//! No I/O, no clock, no logging: the codec is a pure function of its input.
//!
//! - [`decode`] takes one frame off a `BytesMut` (`Ok(None)` while it is incomplete); strings,
//!   topics, binary fields and payloads are slices of the input, never copies.
//! - [`encode`] appends a packet for a protocol version; [`SharedPublish`] encodes a message
//!   once and frames it per subscriber without copying the payload.
//! - Every [`DecodeError`] maps to the [`ReasonCode`] a receiver reports.
#![forbid(unsafe_code)]

mod decode;
mod encode;
mod error;
mod packet;
mod properties;
mod read;
mod reason;
mod shared_publish;
mod string;
mod types;
mod varint;
mod write;

pub use decode::{
    Limits, PROTOCOL_MAX_PACKET_SIZE, ShortAck, decode, peek_frame_len, take_short_ack,
};
pub use encode::{encode, encoded_len};
pub use error::{DecodeError, EncodeError};
pub use packet::{
    Auth, ConnAck, Connect, ConnectFrame, Disconnect, Packet, PacketType, PingReq, PingResp,
    PubAck, PubComp, PubRec, PubRel, Publish, SubAck, Subscribe, TopicPayload, UnsubAck,
    Unsubscribe, Will,
};
pub use properties::{
    AckProperties, AppProperties, AppPropertiesBuilder, AuthProperties, ConnAckProperties,
    ConnectProperties, DisconnectProperties, PayloadFormat, PropertyId, PublishProperties,
    PublishPropertiesBox, SubscribeProperties, UnsubscribeProperties, UserProperty, WillProperties,
};
pub use reason::ReasonCode;
pub use shared_publish::{FrameOptions, PublishFrame, SharedPublish, TopicAliasUse};
pub use string::MqttStr;
pub use types::{
    PacketId, ProtocolVersion, QoS, RetainHandling, SubscriptionId, SubscriptionOptions,
};
pub use varint::MAX_VARIABLE_BYTE_INTEGER;
