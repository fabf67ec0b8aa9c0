//! CONNECT of any protocol version: the input is a CONNECT body, framed here, so every
//! execution reaches the CONNECT parser. A decoded CONNECT must read back the same whether its
//! values are shared or copied, and re-encode from them to an equal packet.
#![no_main]

use bytes::BytesMut;
use codec::{Packet, ProtocolVersion, decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let Ok(len) = u32::try_from(body.len()) else {
        return;
    };
    let mut frame = BytesMut::from(&[0x10u8][..]);
    let mut rest = len;
    loop {
        let byte = (rest % 128) as u8;
        rest /= 128;
        frame.extend_from_slice(&[if rest > 0 { byte | 0x80 } else { byte }]);
        if rest == 0 {
            break;
        }
    }
    frame.extend_from_slice(body);
    let limits = ringmq_fuzz::limits(ProtocolVersion::V3_1_1);
    let Ok(Some(packet)) = decode(&mut frame, &limits) else {
        return;
    };
    let Packet::ConnectFrame(frame) = &packet else {
        panic!("a type-1 frame decoded to {packet:?}");
    };
    // The values read back, shared or copied, make the same CONNECT, and it encodes from them.
    let connect = frame.to_connect();
    assert_eq!(frame.to_detached(), connect);
    let built = Packet::from(connect.clone());
    let mut wire = BytesMut::new();
    encode(&built, connect.protocol, &mut wire).expect("a decoded CONNECT is encodable");
    let again = decode(&mut wire, &limits).expect("re-encoded CONNECT decodes");
    assert_eq!(again.as_ref(), Some(&built));
    assert!(wire.is_empty());
});
