//! The packet model: one struct per MQTT control packet, the [`Packet`] enum over them, and the
//! internal [`Wire`] trait each packet implements to decode and encode itself.

mod ack;
mod connack;
pub(crate) mod connect;
pub(crate) mod connect_frame;
mod connect_wire;
mod disconnect;
mod packet_type;
pub(crate) mod publish;
mod subscribe;
mod topic_payload;
mod unsubscribe;

use bytes::BytesMut;

pub use ack::{PubAck, PubComp, PubRec, PubRel};
pub use connack::ConnAck;
pub use connect::{Connect, Will};
pub use connect_frame::ConnectFrame;
pub use disconnect::{Auth, Disconnect};
pub use packet_type::PacketType;
pub use publish::Publish;
pub use subscribe::{SubAck, Subscribe};
pub use topic_payload::TopicPayload;
pub use unsubscribe::{UnsubAck, Unsubscribe};

use crate::read::Reader;
use crate::{DecodeError, EncodeError, ProtocolVersion};

/// PINGREQ: no variable header, no payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PingReq;

/// PINGRESP: no variable header, no payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PingResp;

/// Any MQTT control packet. MQTT 3.1/3.1.1 and 5.0 share this model; the differences live in
/// the wire encoding (a 3.1.1 PUBACK decodes with reason Success and no properties).
#[derive(Debug, Clone)]
pub enum Packet {
    /// CONNECT to send (boxed: large and once per connection, it would bloat every packet).
    Connect(Box<Connect>),
    /// CONNECT as received: what decoding gives (boxed, like [`Packet::Connect`]).
    ConnectFrame(Box<ConnectFrame>),
    /// CONNACK (boxed, like CONNECT).
    ConnAck(Box<ConnAck>),
    /// PUBLISH.
    Publish(Publish),
    /// PUBACK.
    PubAck(PubAck),
    /// PUBREC.
    PubRec(PubRec),
    /// PUBREL.
    PubRel(PubRel),
    /// PUBCOMP.
    PubComp(PubComp),
    /// SUBSCRIBE.
    Subscribe(Subscribe),
    /// SUBACK.
    SubAck(SubAck),
    /// UNSUBSCRIBE.
    Unsubscribe(Unsubscribe),
    /// UNSUBACK.
    UnsubAck(UnsubAck),
    /// PINGREQ.
    PingReq(PingReq),
    /// PINGRESP.
    PingResp(PingResp),
    /// DISCONNECT.
    Disconnect(Disconnect),
    /// AUTH (5.0 only).
    Auth(Auth),
}

impl Packet {
    /// The control packet type.
    pub const fn packet_type(&self) -> PacketType {
        match self {
            Self::Connect(_) | Self::ConnectFrame(_) => PacketType::Connect,
            Self::ConnAck(_) => PacketType::ConnAck,
            Self::Publish(_) => PacketType::Publish,
            Self::PubAck(_) => PacketType::PubAck,
            Self::PubRec(_) => PacketType::PubRec,
            Self::PubRel(_) => PacketType::PubRel,
            Self::PubComp(_) => PacketType::PubComp,
            Self::Subscribe(_) => PacketType::Subscribe,
            Self::SubAck(_) => PacketType::SubAck,
            Self::Unsubscribe(_) => PacketType::Unsubscribe,
            Self::UnsubAck(_) => PacketType::UnsubAck,
            Self::PingReq(_) => PacketType::PingReq,
            Self::PingResp(_) => PacketType::PingResp,
            Self::Disconnect(_) => PacketType::Disconnect,
            Self::Auth(_) => PacketType::Auth,
        }
    }
}

/// Packets are equal when their values are: a CONNECT as received equals the CONNECT built
/// with the same values.
impl PartialEq for Packet {
    fn eq(&self, other: &Self) -> bool {
        macro_rules! same_variant {
            ($($variant:ident),*) => {
                match (self, other) {
                    (Self::Connect(a), Self::ConnectFrame(b))
                    | (Self::ConnectFrame(b), Self::Connect(a)) => **a == b.to_connect(),
                    (Self::ConnectFrame(a), Self::ConnectFrame(b)) => a == b,
                    $((Self::$variant(a), Self::$variant(b)) => a == b,)*
                    _ => false,
                }
            };
        }
        same_variant!(
            Connect,
            ConnAck,
            Publish,
            PubAck,
            PubRec,
            PubRel,
            PubComp,
            Subscribe,
            SubAck,
            Unsubscribe,
            UnsubAck,
            PingReq,
            PingResp,
            Disconnect,
            Auth
        )
    }
}

impl Eq for Packet {}

macro_rules! into_packet {
    ($($variant:ident => |$value:ident| $wrap:expr;)*) => {
        $(
            impl From<$variant> for Packet {
                fn from($value: $variant) -> Self {
                    Packet::$variant($wrap)
                }
            }
        )*
    };
}

into_packet! {
    Connect => |p| Box::new(p);
    ConnAck => |p| Box::new(p);
    Publish => |p| p;
    PubAck => |p| p;
    PubRec => |p| p;
    PubRel => |p| p;
    PubComp => |p| p;
    Subscribe => |p| p;
    SubAck => |p| p;
    Unsubscribe => |p| p;
    UnsubAck => |p| p;
    PingReq => |p| p;
    PingResp => |p| p;
    Disconnect => |p| p;
    Auth => |p| p;
}

/// How one packet type reads its body and writes itself. `measure` validates everything and
/// returns the remaining length plus whatever `write` needs (property block lengths), so that
/// `write` cannot fail and nothing is written for a packet that cannot be encoded.
pub(crate) trait Wire: Sized {
    const TYPE: PacketType;
    type Plan;

    /// Decodes the body after the fixed header; `flags` were checked against
    /// [`PacketType::required_flags`].
    fn decode(flags: u8, body: Reader, protocol: ProtocolVersion) -> Result<Self, DecodeError>;

    /// The fixed header flags of this packet.
    fn flags(&self) -> u8 {
        Self::TYPE.required_flags().unwrap_or(0)
    }

    fn measure(&self, protocol: ProtocolVersion) -> Result<(usize, Self::Plan), EncodeError>;

    fn write(&self, protocol: ProtocolVersion, plan: &Self::Plan, buf: &mut BytesMut);
}

/// PINGREQ and PINGRESP: no variable header, no payload, in every version.
macro_rules! empty_packet_wire {
    ($($name:ident),*) => {
        $(
            impl Wire for $name {
                const TYPE: PacketType = PacketType::$name;
                type Plan = ();

                fn decode(_: u8, body: Reader, _: ProtocolVersion) -> Result<Self, DecodeError> {
                    body.finish(Self::TYPE)?;
                    Ok(Self)
                }

                fn measure(&self, _: ProtocolVersion) -> Result<(usize, ()), EncodeError> {
                    Ok((0, ()))
                }

                fn write(&self, _: ProtocolVersion, _: &(), _: &mut BytesMut) {}
            }
        )*
    };
}

empty_packet_wire!(PingReq, PingResp);
