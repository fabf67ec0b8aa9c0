//! The bench payload: a stamp the receiver reads back for latency, loss and order.
//!
//! Layout (little endian): send time in ns since the Unix epoch (8 bytes), publisher index
//! (4 bytes), sequence number (4 bytes), then zero padding up to the payload size.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};

/// Bytes the stamp takes.
pub const STAMP_LEN: usize = 16;

/// What a payload says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub sent_ns: u64,
    pub publisher: u32,
    pub seq: u32,
}

/// Nanoseconds since the Unix epoch (shared by every process on the machine).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A payload of `size` bytes (at least [`STAMP_LEN`]) carrying `stamp`.
pub fn build(stamp: Stamp, size: usize, buf: &mut BytesMut) -> Bytes {
    let size = size.max(STAMP_LEN);
    buf.reserve(size);
    buf.put_u64_le(stamp.sent_ns);
    buf.put_u32_le(stamp.publisher);
    buf.put_u32_le(stamp.seq);
    buf.put_bytes(0, size - STAMP_LEN);
    buf.split().freeze()
}

/// Reads the stamp of a payload (`None` when it is too short to carry one).
pub fn parse(payload: &[u8]) -> Option<Stamp> {
    let sent_ns = u64::from_le_bytes(payload.get(0..8)?.try_into().ok()?);
    let publisher = u32::from_le_bytes(payload.get(8..12)?.try_into().ok()?);
    let seq = u32::from_le_bytes(payload.get(12..16)?.try_into().ok()?);
    Some(Stamp {
        sent_ns,
        publisher,
        seq,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trips_and_pads() {
        let stamp = Stamp {
            sent_ns: 123_456_789,
            publisher: 7,
            seq: 42,
        };
        let mut buf = BytesMut::new();
        let payload = build(stamp, 64, &mut buf);
        assert_eq!(payload.len(), 64);
        assert_eq!(parse(&payload), Some(stamp));
        assert_eq!(build(stamp, 4, &mut buf).len(), STAMP_LEN);
        assert_eq!(parse(&payload[..10]), None);
    }
}
