//! Encoding: [`encode`] appends one packet to a buffer, or nothing on error.

use bytes::BytesMut;

use crate::packet::{Packet, Wire};
use crate::{EncodeError, ProtocolVersion, write};

/// Something that works on any packet type; lets [`encode`] and [`encoded_len`] share one
/// dispatch over [`Packet`].
trait Visitor {
    type Output;
    fn visit<P: Wire>(self, packet: &P) -> Self::Output;
}

fn dispatch<V: Visitor>(packet: &Packet, visitor: V) -> V::Output {
    match packet {
        Packet::Connect(p) => visitor.visit(p.as_ref()),
        Packet::ConnectFrame(p) => visitor.visit(p.as_ref()),
        Packet::ConnAck(p) => visitor.visit(p.as_ref()),
        Packet::Publish(p) => visitor.visit(p),
        Packet::PubAck(p) => visitor.visit(p),
        Packet::PubRec(p) => visitor.visit(p),
        Packet::PubRel(p) => visitor.visit(p),
        Packet::PubComp(p) => visitor.visit(p),
        Packet::Subscribe(p) => visitor.visit(p),
        Packet::SubAck(p) => visitor.visit(p),
        Packet::Unsubscribe(p) => visitor.visit(p),
        Packet::UnsubAck(p) => visitor.visit(p),
        Packet::PingReq(p) => visitor.visit(p),
        Packet::PingResp(p) => visitor.visit(p),
        Packet::Disconnect(p) => visitor.visit(p),
        Packet::Auth(p) => visitor.visit(p),
    }
}

struct Encoder<'a> {
    protocol: ProtocolVersion,
    buf: &'a mut BytesMut,
}

impl Visitor for Encoder<'_> {
    type Output = Result<(), EncodeError>;

    fn visit<P: Wire>(self, packet: &P) -> Self::Output {
        let (remaining, plan) = packet.measure(self.protocol)?;
        let total = write::frame_len(remaining)?;
        self.buf.reserve(total);
        let start = self.buf.len();
        let first_byte = (P::TYPE as u8) << 4 | packet.flags();
        write::put_fixed_header(self.buf, first_byte, remaining);
        packet.write(self.protocol, &plan, self.buf);
        debug_assert_eq!(
            self.buf.len() - start,
            total,
            "invariant: measure and write agree"
        );
        Ok(())
    }
}

struct Measurer {
    protocol: ProtocolVersion,
}

impl Visitor for Measurer {
    type Output = Result<usize, EncodeError>;

    fn visit<P: Wire>(self, packet: &P) -> Self::Output {
        let (remaining, _) = packet.measure(self.protocol)?;
        write::frame_len(remaining)
    }
}

/// Appends `packet` encoded for `protocol` to `buf`. CONNECT is encoded for its own
/// `protocol` field. 5.0-only content (properties, reason codes of acknowledgements and
/// DISCONNECT) is dropped for 3.x; reason codes 3.x cannot express at all (CONNACK) are an
/// error. Everything is checked before anything is written: on error `buf` is unchanged.
pub fn encode(
    packet: &Packet,
    protocol: ProtocolVersion,
    buf: &mut BytesMut,
) -> Result<(), EncodeError> {
    dispatch(packet, Encoder { protocol, buf })
}

/// The size of the frame [`encode`] would write, fixed header included (compare it with the
/// peer's Maximum Packet Size before sending).
pub fn encoded_len(packet: &Packet, protocol: ProtocolVersion) -> Result<usize, EncodeError> {
    dispatch(packet, Measurer { protocol })
}
