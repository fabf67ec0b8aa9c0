//! [`EarlyGate`]: which MQTT packets of a client's 0-RTT data the broker acts on before the
//! handshake completes.
//!
//! 0-RTT data can be replayed. The listener's resumption tickets are single-use (a replayed
//! ClientHello finds its ticket gone: a full handshake, the early data discarded), which stops
//! a replay after the client's own use. What they cannot stop is an attacker on the path who
//! holds the client's first flight back and sends a copy first: the copy's early data is
//! accepted, the client's own 0-RTT is refused, and the client sends the same packets again
//! after its handshake. So any early packet may be handled twice, and the broker handles early
//! only the packets for which twice does no harm:
//! - CONNECT without a Will (a second CONNECT takes the session over, as a reconnect does; a
//!   Will would be published by that takeover);
//! - PUBLISH at QoS 1 (at least once already allows a duplicate);
//! - SUBSCRIBE, UNSUBSCRIBE and PINGREQ (the same subscription made twice is one).
//!
//! From the first other packet on (a QoS 0 or QoS 2 PUBLISH, an acknowledgement, AUTH,
//! DISCONNECT, a packet over [`EARLY_PACKET_MAX`] bytes, the end of the stream), everything
//! waits for the handshake, in order. A copy that never completes the handshake never gets
//! that far.

use bytes::{Buf, Bytes, BytesMut};

/// The largest packet handled before the handshake completes; a larger one waits (what the
/// gate holds stays within about twice this).
pub(super) const EARLY_PACKET_MAX: usize = 64 * 1024;

/// MQTT control packet types (the fixed header's high nibble).
const CONNECT: u8 = 1;
const PUBLISH: u8 = 3;
const SUBSCRIBE: u8 = 8;
const UNSUBSCRIBE: u8 = 10;
const PINGREQ: u8 = 12;
/// CONNECT's Will Flag (MQTT 3.1.1 and 5.0, section 3.1.2.5).
const WILL_FLAG: u8 = 0x04;

/// The MQTT stream's bytes while the handshake runs: whole replay-safe packets go on, the rest
/// is held until [`EarlyGate::open`].
#[derive(Debug, Default)]
pub(super) struct EarlyGate {
    /// Bytes not handed on yet: an incomplete packet, or everything from the first packet
    /// that must wait.
    held: BytesMut,
    /// A packet that must wait was reached: nothing more goes on early.
    shut: bool,
    /// The client ended the stream during the handshake (reported after the held bytes).
    finished: bool,
}

impl EarlyGate {
    /// Takes `chunk` of the stream; returns the whole replay-safe packets that may go to the
    /// broker now.
    pub(super) fn admit(&mut self, chunk: &[u8]) -> Option<Bytes> {
        self.held.extend_from_slice(chunk);
        if self.shut {
            return None;
        }
        let (safe, stop) = safe_prefix(&self.held);
        if stop == Stop::MustWait {
            self.shut = true;
        }
        (safe > 0).then(|| self.held.split_to(safe).freeze())
    }

    /// The client ended the stream before the handshake completed.
    pub(super) fn finish(&mut self) {
        self.finished = true;
        self.shut = true;
    }

    /// Whether the gate stopped handing bytes on: read no more until the handshake completes
    /// (QUIC's flow control holds the client back meanwhile).
    pub(super) fn is_shut(&self) -> bool {
        self.shut
    }

    /// The handshake completed: what was held, and whether the stream had ended.
    pub(super) fn open(self) -> (Bytes, bool) {
        (self.held.freeze(), self.finished)
    }
}

/// Why [`safe_prefix`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// At the end of the bytes or inside a packet not complete yet.
    Incomplete,
    /// At a packet that must wait for the handshake.
    MustWait,
}

/// The length of the whole replay-safe packets at the start of `bytes`, and why it stops.
fn safe_prefix(bytes: &[u8]) -> (usize, Stop) {
    let mut at = 0;
    loop {
        let rest = &bytes[at..];
        match packet_len(rest) {
            Frame::Incomplete => return (at, Stop::Incomplete),
            Frame::Malformed => return (at, Stop::MustWait),
            Frame::Whole(len) if len > EARLY_PACKET_MAX => return (at, Stop::MustWait),
            Frame::Whole(len) if rest.len() < len => return (at, Stop::Incomplete),
            Frame::Whole(len) if replay_safe(&rest[..len]) => at += len,
            Frame::Whole(_) => return (at, Stop::MustWait),
        }
    }
}

/// A packet's extent, read from its fixed header.
enum Frame {
    /// The fixed header is not all there yet.
    Incomplete,
    /// A Remaining Length of more than four bytes.
    Malformed,
    /// The packet's whole length (fixed header included).
    Whole(usize),
}

fn packet_len(bytes: &[u8]) -> Frame {
    let mut remaining = 0usize;
    for (i, &byte) in bytes.iter().skip(1).take(4).enumerate() {
        remaining |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Frame::Whole(1 + (i + 1) + remaining);
        }
    }
    if bytes.len() > 4 {
        Frame::Malformed
    } else {
        Frame::Incomplete
    }
}

/// Whether handling `packet` (one whole packet) twice does no harm (module documentation).
fn replay_safe(packet: &[u8]) -> bool {
    let first = packet[0];
    match first >> 4 {
        CONNECT => connect_has_no_will(packet),
        PUBLISH => (first >> 1) & 0x03 == 1,
        SUBSCRIBE | UNSUBSCRIBE | PINGREQ => true,
        _ => false,
    }
}

/// Whether a CONNECT's flags say it has no Will (a CONNECT too short to say is not safe: the
/// broker refuses it after the handshake).
fn connect_has_no_will(packet: &[u8]) -> bool {
    let header = 1 + packet[1..].iter().take_while(|b| **b & 0x80 != 0).count() + 1;
    let mut body = packet.get(header..).unwrap_or_default();
    if body.len() < 2 {
        return false;
    }
    let name = usize::from(body.get_u16());
    // The protocol name, then the level byte, then the flags.
    body.get(name + 1)
        .is_some_and(|flags| flags & WILL_FLAG == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CONNECT (3.1.1, clean session) for client `c`, with a Will when `will`.
    fn connect(will: bool) -> Vec<u8> {
        let flags = if will { 0x02 | WILL_FLAG } else { 0x02 };
        let mut body = vec![0, 4, b'M', b'Q', b'T', b'T', 4, flags, 0, 60, 0, 1, b'c'];
        if will {
            body.extend_from_slice(&[0, 1, b'w', 0, 1, b'x']);
        }
        framed(0x10, &body)
    }

    fn framed(first: u8, body: &[u8]) -> Vec<u8> {
        let mut packet = vec![first, u8::try_from(body.len()).unwrap()];
        packet.extend_from_slice(body);
        packet
    }

    fn publish(qos: u8) -> Vec<u8> {
        let id: &[u8] = if qos > 0 { &[0, 7] } else { &[] };
        framed(0x30 | (qos << 1), &[&[0, 1, b't'][..], id, b"hi"].concat())
    }

    #[test]
    fn a_connect_and_a_qos_1_publish_go_on_and_a_qos_0_publish_waits_with_what_follows() {
        let mut gate = EarlyGate::default();
        let stream = [connect(false), publish(1), publish(0), publish(1)].concat();
        let early = gate.admit(&stream).unwrap();
        assert_eq!(&early[..], &[connect(false), publish(1)].concat()[..]);
        assert!(gate.is_shut());
        assert_eq!(gate.admit(b"\xc0\x00"), None, "nothing goes on once shut");
        let (held, finished) = gate.open();
        assert_eq!(
            &held[..],
            &[publish(0), publish(1), b"\xc0\x00".to_vec()].concat()[..]
        );
        assert!(!finished);
    }

    #[test]
    fn a_connect_with_a_will_waits() {
        let mut gate = EarlyGate::default();
        assert_eq!(gate.admit(&connect(true)), None);
        assert!(gate.is_shut());
    }

    #[test]
    fn qos_2_acknowledgements_disconnect_and_auth_wait() {
        for packet in [
            publish(2),
            framed(0x40, &[0, 7]),
            framed(0x62, &[0, 7]),
            framed(0xe0, &[]),
            framed(0xf0, &[]),
        ] {
            let mut gate = EarlyGate::default();
            assert_eq!(gate.admit(&packet), None, "{packet:02x?}");
            assert!(gate.is_shut());
        }
    }

    #[test]
    fn a_packet_split_across_chunks_goes_on_once_whole() {
        let mut gate = EarlyGate::default();
        let stream = [connect(false), framed(0x82, &[0, 1, 0, 1, b'#', 1])].concat();
        let mut out = Vec::new();
        for byte in &stream {
            out.extend_from_slice(&gate.admit(&[*byte]).unwrap_or_default());
        }
        assert_eq!(out, stream);
        assert!(!gate.is_shut());
    }

    #[test]
    fn a_packet_larger_than_the_early_bound_waits() {
        let mut gate = EarlyGate::default();
        // A QoS 1 PUBLISH announcing 100,000 bytes: its header alone shuts the gate.
        let header = [0x32, 0xa0, 0x8d, 0x06];
        assert_eq!(gate.admit(&header), None);
        assert!(gate.is_shut());
    }

    #[test]
    fn a_remaining_length_over_four_bytes_waits() {
        let mut gate = EarlyGate::default();
        assert_eq!(gate.admit(&[0x32, 0xff, 0xff, 0xff, 0xff, 0x01]), None);
        assert!(gate.is_shut());
    }

    #[test]
    fn the_end_of_the_stream_is_reported_after_the_held_bytes() {
        let mut gate = EarlyGate::default();
        assert!(gate.admit(&publish(1)[..3]).is_none());
        gate.finish();
        let (held, finished) = gate.open();
        assert_eq!(&held[..], &publish(1)[..3]);
        assert!(finished);
    }
}
