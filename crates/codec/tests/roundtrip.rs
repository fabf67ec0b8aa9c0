//! Property tests: encode -> decode is the identity for every valid packet of every version,
//! and a stream of packets decodes the same however it is split.

mod strategy;

use bytes::BytesMut;
use codec::{Limits, Packet, ProtocolVersion, decode, encode, encoded_len};
use proptest::collection::vec;
use proptest::prelude::*;

const VERSIONS: [ProtocolVersion; 3] = [
    ProtocolVersion::V3_1,
    ProtocolVersion::V3_1_1,
    ProtocolVersion::V5,
];

fn any_version() -> impl Strategy<Value = ProtocolVersion> {
    proptest::sample::select(VERSIONS.to_vec())
}

fn version_and_packets(max: usize) -> impl Strategy<Value = (ProtocolVersion, Vec<Packet>)> {
    any_version().prop_flat_map(move |v| (Just(v), vec(strategy::packet(v), 1..max)))
}

fn encode_all(packets: &[Packet], protocol: ProtocolVersion) -> BytesMut {
    let mut wire = BytesMut::new();
    for packet in packets {
        encode(packet, protocol, &mut wire).expect("valid packets encode");
    }
    wire
}

/// Decodes everything in `buf`, asserting that `Ok(None)` consumes nothing.
fn drain(buf: &mut BytesMut, limits: &Limits, out: &mut Vec<Packet>) {
    loop {
        let before = buf.len();
        match decode(buf, limits).expect("valid stream") {
            Some(packet) => out.push(packet),
            None => {
                assert_eq!(buf.len(), before, "an incomplete frame consumes nothing");
                return;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn encode_then_decode_is_the_identity((protocol, packets) in version_and_packets(2)) {
        let packet = &packets[0];
        let wire = encode_all(&packets, protocol);
        prop_assert_eq!(encoded_len(packet, protocol), Ok(wire.len()));
        let mut buf = wire;
        let decoded = decode(&mut buf, &Limits::new(protocol)).expect("decodes");
        prop_assert_eq!(decoded.as_ref(), Some(packet));
        prop_assert!(buf.is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn splitting_a_stream_anywhere_decodes_the_same_packets(
        (protocol, packets) in version_and_packets(5)
    ) {
        let wire = encode_all(&packets, protocol);
        let limits = Limits::new(protocol);
        for split in 0..=wire.len() {
            let mut buf = BytesMut::from(&wire[..split]);
            let mut got = Vec::new();
            drain(&mut buf, &limits, &mut got);
            buf.extend_from_slice(&wire[split..]);
            drain(&mut buf, &limits, &mut got);
            prop_assert_eq!(&got, &packets, "split at {}", split);
            prop_assert!(buf.is_empty());
        }
    }

    #[test]
    fn feeding_one_byte_at_a_time_decodes_the_same_packets(
        (protocol, packets) in version_and_packets(5)
    ) {
        let wire = encode_all(&packets, protocol);
        let limits = Limits::new(protocol);
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for byte in wire.iter() {
            buf.extend_from_slice(&[*byte]);
            drain(&mut buf, &limits, &mut got);
        }
        prop_assert_eq!(got, packets);
    }
}
