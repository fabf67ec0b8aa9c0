//! Checks shared by the fuzz targets.

pub mod session;

use bytes::BytesMut;
use codec::{DecodeError, Limits, Packet, ProtocolVersion, decode};

/// Small enough that the fuzzer finds "packet too large" paths, large enough for real packets.
const FUZZ_MAX_PACKET_SIZE: u32 = 64 * 1024;

/// Everything decoding a byte stream yields: the packets, then how it stopped.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    pub packets: Vec<Packet>,
    pub error: Option<DecodeError>,
}

/// The limits the targets decode with.
pub fn limits(protocol: ProtocolVersion) -> Limits {
    Limits::new(protocol).with_max_packet_size(FUZZ_MAX_PACKET_SIZE)
}

/// Decodes `data` fed in chunks of `chunk` bytes (0: all at once), checking the framing
/// contract: `Ok(None)` consumes nothing, a packet consumes something.
pub fn decode_stream(data: &[u8], chunk: usize, protocol: ProtocolVersion) -> Outcome {
    let limits = limits(protocol);
    let chunk = if chunk == 0 { data.len().max(1) } else { chunk };
    let mut buf = BytesMut::new();
    let mut packets = Vec::new();
    for piece in data.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            let before = buf.len();
            match decode(&mut buf, &limits) {
                Ok(Some(packet)) => {
                    assert!(buf.len() < before, "a packet consumes its frame");
                    packets.push(packet);
                }
                Ok(None) => {
                    assert_eq!(buf.len(), before, "an incomplete frame consumes nothing");
                    break;
                }
                Err(error) => {
                    let _ = error.reason_code();
                    return Outcome {
                        packets,
                        error: Some(error),
                    };
                }
            }
        }
    }
    Outcome {
        packets,
        error: None,
    }
}

/// Decodes `data` whole and in chunks (size from its first byte) and checks both agree.
pub fn check_decoder(data: &[u8], protocol: ProtocolVersion) {
    let whole = decode_stream(data, 0, protocol);
    let chunk = usize::from(data.first().copied().unwrap_or(1) % 16) + 1;
    let chunked = decode_stream(data, chunk, protocol);
    assert_eq!(
        whole, chunked,
        "feeding in chunks of {chunk} changes the result"
    );
}
