//! decode -> encode -> decode gives the same packets. The first byte picks the protocol
//! version; the rest is the stream.
#![no_main]

use bytes::BytesMut;
use codec::{ProtocolVersion, decode, encode, encoded_len};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, stream)) = data.split_first() else {
        return;
    };
    let protocol = match selector % 3 {
        0 => ProtocolVersion::V3_1,
        1 => ProtocolVersion::V3_1_1,
        _ => ProtocolVersion::V5,
    };
    let limits = ringmq_fuzz::limits(protocol);
    let outcome = ringmq_fuzz::decode_stream(stream, 0, protocol);
    for packet in outcome.packets {
        let mut wire = BytesMut::new();
        encode(&packet, protocol, &mut wire).expect("a decoded packet is encodable");
        assert_eq!(encoded_len(&packet, protocol), Ok(wire.len()));
        let again = decode(&mut wire, &limits).expect("an encoded packet decodes");
        assert_eq!(
            again.as_ref(),
            Some(&packet),
            "round trip changed the packet"
        );
        assert!(wire.is_empty(), "the encoding is exactly one frame");
    }
});
