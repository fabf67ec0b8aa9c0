//! `take_short_ack`: the receiver's fast read of an acknowledgement that holds only its packet
//! id. It must take exactly what `decode` would read as such an acknowledgement, and leave
//! everything else (consuming nothing) for `decode`.

mod common;

use codec::{DecodeError as E, Limits, PacketType, decode, take_short_ack};
use common::{V3, V5, hex};

#[test]
fn each_short_acknowledgement_is_taken_whole_and_equals_what_decode_reads() {
    for (wire, packet) in [
        ("40 02 00 07", PacketType::PubAck),
        ("50 02 00 07", PacketType::PubRec),
        ("62 02 00 07", PacketType::PubRel),
        ("70 02 00 07", PacketType::PubComp),
    ] {
        for protocol in [V3, V5] {
            let limits = Limits::new(protocol);
            let mut buf = hex(&format!("{wire} 30"));
            let ack = take_short_ack(&mut buf, &limits)
                .expect("valid frame")
                .expect("a short acknowledgement");
            assert_eq!((ack.packet, ack.packet_id.get()), (packet, 7));
            assert_eq!(buf.len(), 1, "{wire}: exactly its four bytes taken");
            let decoded = decode(&mut hex(wire), &limits)
                .expect("valid")
                .expect("whole");
            assert_eq!(ack.into_packet(), decoded);
        }
    }
}

#[test]
fn other_and_incomplete_frames_are_left_for_decode() {
    let limits = Limits::new(V5);
    for wire in [
        "30 04 00 01 61 62", // PUBLISH
        "40 03 00 09 10",    // 5.0 PUBACK with a reason code
        "40 02 00",          // PUBACK missing a byte
        "C0 00",             // PINGREQ
        "",
    ] {
        let mut buf = hex(wire);
        let len = buf.len();
        assert_eq!(take_short_ack(&mut buf, &limits), Ok(None), "{wire}");
        assert_eq!(buf.len(), len, "{wire}: nothing consumed");
    }
}

#[test]
fn a_zero_packet_id_or_wrong_flags_is_the_error_decode_gives() {
    let limits = Limits::new(V3);
    for wire in ["40 02 00 00", "60 02 00 07", "41 02 00 07"] {
        let expected = decode(&mut hex(wire), &limits).expect_err("malformed");
        assert!(matches!(
            expected,
            E::ZeroPacketId { .. } | E::InvalidFixedHeaderFlags { .. }
        ));
        assert_eq!(
            take_short_ack(&mut hex(wire), &limits),
            Err(expected),
            "{wire}"
        );
    }
}
