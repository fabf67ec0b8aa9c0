//! The partial-frame (carry) buffer's growth: it holds what arrived, never the length a frame
//! announces. A slow sender announcing a large packet costs the bytes it has sent (at most half
//! as much again while the buffer grows), and the bytes of a completed read are not pinned by a
//! few bytes of a following frame.

use bytes::{Bytes, BytesMut};

/// The buffer to decode from: the received bytes themselves when nothing was carried over (no
/// copy when they are uniquely owned), else the carry with `data` appended. When the carry must
/// grow it grows by half its length (amortised copying), but never past the length the frame at
/// its front announces (`frame_len`, when its fixed header is complete) unless `data` itself
/// needs more.
pub fn join(mut carry: BytesMut, data: Bytes, frame_len: Option<usize>) -> BytesMut {
    if carry.is_empty() {
        return data
            .try_into_mut()
            .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
    }
    let needed = carry.len() + data.len();
    if carry.capacity() >= needed {
        carry.extend_from_slice(&data);
        return carry;
    }
    let grown = (carry.len() + carry.len() / 2).min(frame_len.unwrap_or(usize::MAX));
    let mut joined = BytesMut::with_capacity(needed.max(grown));
    joined.extend_from_slice(&carry);
    joined.extend_from_slice(&data);
    joined
}

/// What to keep of a buffer after decoding: when frames were taken from it (it is shorter than
/// `decoded_from`), the partial rest is copied into its own allocation so it does not pin the
/// whole read; otherwise the buffer as it is.
pub fn compact(buf: BytesMut, decoded_from: usize) -> BytesMut {
    if buf.is_empty() || buf.len() == decoded_from {
        return buf;
    }
    BytesMut::from(&buf[..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_are_taken_as_they_are() {
        let joined = join(BytesMut::new(), Bytes::from(vec![1u8; 10]), None);
        assert_eq!(joined.len(), 10);
        assert_eq!(joined.capacity(), 10);
    }

    #[test]
    fn growth_follows_what_arrived_not_the_announced_length() {
        let mut carry = BytesMut::new();
        let announced = 1_000_000;
        for _ in 0..100 {
            carry = join(carry, Bytes::from(vec![0u8; 1000]), Some(announced));
            assert!(carry.capacity() <= carry.len() * 3 / 2 + 1000, "{carry:?}");
        }
        assert_eq!(carry.len(), 100_000);
    }

    #[test]
    fn growth_stops_at_the_frame_length() {
        let carry = BytesMut::from(&[0u8; 800][..]);
        let joined = join(carry, Bytes::from(vec![0u8; 100]), Some(1000));
        assert_eq!(joined.len(), 900);
        assert!(
            joined.capacity() < 1200,
            "capped near the frame: {}",
            joined.capacity()
        );
    }

    #[test]
    fn a_tail_left_by_decoding_gets_its_own_allocation() {
        let mut buf = BytesMut::from(&[7u8; 4096][..]);
        let _frames = buf.split_to(4090);
        let kept = compact(buf, 4096);
        assert_eq!(&kept[..], &[7u8; 6]);
        assert!(kept.capacity() < 64);
        let untouched = BytesMut::from(&[1u8; 10][..]);
        assert_eq!(compact(untouched, 10).len(), 10);
    }
}
