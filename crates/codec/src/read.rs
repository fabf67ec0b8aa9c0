//! `Reader`: a cursor over one frame's `Bytes` that hands out zero-copy slices and turns every
//! short read into [`DecodeError::UnexpectedEnd`].
//!
//! The reader moves an index over one `Bytes` and can narrow its end, so a bounded sub-read (a
//! property block) needs no handle of its own, and the buffer comes back whole at the end (a
//! PUBLISH keeps it as its one handle): every `Bytes` handle costs an atomic reference-count
//! update, which is the dominant cost of decoding small packets.

use bytes::{Buf, Bytes};

use crate::packet::PacketType;
use crate::string::{self, MqttStr};
use crate::varint::{self, Varint};
use crate::{DecodeError, PacketId};

pub(crate) struct Reader {
    buf: Bytes,
    /// Index of the next unread byte.
    pos: usize,
    /// Index one past the last readable byte (the end of `buf` outside a `limited` read).
    end: usize,
    /// Whether a read of the last bytes of `buf` hands over the reader's own handle instead of
    /// making another one (saving a reference-count increment and decrement). Off where the
    /// whole buffer is wanted back ([`Self::into_buffer`]).
    lend_tail: bool,
}

impl Reader {
    #[inline]
    pub(crate) fn new(buf: Bytes) -> Self {
        let end = buf.len();
        Self {
            buf,
            pos: 0,
            end,
            lend_tail: true,
        }
    }

    /// This reader, keeping its buffer whole for [`Self::into_buffer`].
    #[inline]
    pub(crate) fn keeping_whole(self) -> Self {
        Self {
            lend_tail: false,
            ..self
        }
    }

    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.end - self.pos
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `len` unread bytes, borrowed (the position does not move).
    #[inline]
    fn peek(&self, len: usize, field: &'static str) -> Result<&[u8], DecodeError> {
        if self.remaining() < len {
            return Err(DecodeError::UnexpectedEnd { field });
        }
        Ok(&self.buf[self.pos..self.pos + len])
    }

    /// The next `N` bytes, consumed.
    #[inline]
    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let bytes: [u8; N] = self
            .peek(N, field)?
            .try_into()
            .expect("invariant: peek returns exactly N bytes");
        self.pos += N;
        Ok(bytes)
    }

    #[inline]
    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    #[inline]
    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    #[inline]
    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn varint(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        match varint::parse(&self.buf[self.pos..self.end]) {
            Varint::Complete { value, len } => {
                self.pos += len;
                Ok(value)
            }
            Varint::Incomplete => Err(DecodeError::UnexpectedEnd { field }),
            Varint::TooLong | Varint::NonMinimal => {
                Err(DecodeError::MalformedVariableByteInteger { field })
            }
        }
    }

    /// The next `len` bytes as a shared slice (one reference-count increment, none if they are
    /// empty or end the buffer).
    #[inline]
    pub(crate) fn take(&mut self, len: usize, field: &'static str) -> Result<Bytes, DecodeError> {
        self.peek(len, field)?;
        let start = self.pos;
        self.pos += len;
        if self.lend_tail && self.pos == self.buf.len() {
            // Nothing is left to read at any level: hand over the reader's handle.
            let mut tail = std::mem::take(&mut self.buf);
            tail.advance(start);
            (self.pos, self.end) = (0, 0);
            return Ok(tail);
        }
        Ok(self.buf.slice(start..self.pos))
    }

    /// The next `len` bytes, borrowed and consumed (no handle).
    #[inline]
    fn slice_in_place(&mut self, len: usize, field: &'static str) -> Result<&[u8], DecodeError> {
        self.peek(len, field)?;
        let start = self.pos;
        self.pos += len;
        Ok(&self.buf[start..self.pos])
    }

    /// Binary Data: a two-byte length and that many bytes.
    #[inline]
    pub(crate) fn binary(&mut self, field: &'static str) -> Result<Bytes, DecodeError> {
        let len = self.u16(field)?;
        self.take(usize::from(len), field)
    }

    /// A UTF-8 Encoded String.
    #[inline]
    pub(crate) fn string(&mut self, field: &'static str) -> Result<MqttStr, DecodeError> {
        let len = usize::from(self.u16(field)?);
        string::validate(self.peek(len, field)?, field)?;
        Ok(MqttStr::from_validated(self.take(len, field)?))
    }

    /// A topic name: a string without wildcards, possibly empty.
    #[inline]
    pub(crate) fn topic_name(&mut self, field: &'static str) -> Result<MqttStr, DecodeError> {
        let len = usize::from(self.u16(field)?);
        string::validate_topic_name(self.peek(len, field)?, field)?;
        Ok(MqttStr::from_validated(self.take(len, field)?))
    }

    /// A topic name left in place: validated and skipped, its length returned (no handle).
    #[inline]
    pub(crate) fn topic_name_in_place(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        let len = self.u16(field)?;
        string::validate_topic_name(self.slice_in_place(usize::from(len), field)?, field)?;
        Ok(len)
    }

    /// Binary Data borrowed and consumed: for a field that is only looked at (no handle).
    #[inline]
    pub(crate) fn binary_in_place(&mut self, field: &'static str) -> Result<&[u8], DecodeError> {
        let len = self.u16(field)?;
        self.slice_in_place(usize::from(len), field)
    }

    /// A non-zero packet identifier.
    #[inline]
    pub(crate) fn packet_id(&mut self, packet: PacketType) -> Result<PacketId, DecodeError> {
        let value = self.u16("packet identifier")?;
        PacketId::new(value).ok_or(DecodeError::ZeroPacketId { packet })
    }

    /// Runs `read` on the next `len` bytes only; they must be consumed exactly.
    pub(crate) fn limited<T>(
        &mut self,
        len: usize,
        field: &'static str,
        read: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        self.peek(len, field)?;
        let outer_end = self.end;
        self.end = self.pos + len;
        let result = read(self);
        let consumed_all = self.is_empty();
        // The buffer may have been handed over by `take` (then it is empty).
        self.end = outer_end.min(self.buf.len());
        let value = result?;
        if !consumed_all {
            return Err(DecodeError::UnexpectedEnd { field });
        }
        Ok(value)
    }

    /// The whole buffer and the index of the first unread byte, consuming the reader (no
    /// reference-count update).
    #[inline]
    pub(crate) fn into_buffer(self) -> (Bytes, usize) {
        debug_assert!(
            !self.lend_tail && self.end == self.buf.len(),
            "invariant: into_buffer() is called on a whole buffer, outside limited()"
        );
        (self.buf, self.pos)
    }

    /// Fails with [`DecodeError::TrailingBytes`] if anything is left.
    pub(crate) fn finish(self, packet: PacketType) -> Result<(), DecodeError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes {
                packet,
                extra: self.remaining(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELD: &str = "test";

    fn reader(bytes: &'static [u8]) -> Reader {
        Reader::new(Bytes::from_static(bytes))
    }

    #[test]
    fn the_last_slice_takes_over_the_handle_and_nothing_is_left() {
        let mut r = reader(b"\x00\x02ab\x00\x03cde");
        assert_eq!(r.binary(FIELD).expect("first"), &b"ab"[..]);
        assert_eq!(r.binary(FIELD).expect("last"), &b"cde"[..]);
        assert!(r.is_empty());
        assert_eq!(
            r.u8(FIELD),
            Err(DecodeError::UnexpectedEnd { field: FIELD })
        );
        assert_eq!(
            r.varint(FIELD),
            Err(DecodeError::UnexpectedEnd { field: FIELD })
        );
        assert!(r.finish(PacketType::PingReq).is_ok());
    }

    #[test]
    fn a_limited_read_that_ends_the_buffer_restores_a_consistent_end() {
        let mut r = reader(b"\x07\x00\x01z");
        assert_eq!(r.u8(FIELD), Ok(7));
        let taken = r.limited(3, FIELD, |inner| inner.binary(FIELD));
        assert_eq!(taken.expect("whole block"), &b"z"[..]);
        assert!(r.is_empty());
        assert!(r.finish(PacketType::PingReq).is_ok());
    }

    #[test]
    fn a_limited_read_must_consume_its_bytes_exactly() {
        let mut r = reader(b"\x01\x02\x03");
        let short = r.limited(2, FIELD, |inner| inner.u8(FIELD));
        assert_eq!(short, Err(DecodeError::UnexpectedEnd { field: FIELD }));
        let mut r = reader(b"\x01\x02\x03");
        assert_eq!(r.limited(2, FIELD, |inner| inner.u16(FIELD)), Ok(0x0102));
        assert_eq!(r.remaining(), 1);
        assert_eq!(
            r.limited(2, FIELD, |_| Ok(())),
            Err(DecodeError::UnexpectedEnd { field: FIELD })
        );
    }

    #[test]
    fn a_reader_keeping_its_buffer_whole_gives_it_back_with_the_position() {
        let mut r = reader(b"\x00\x01a\x00\x01b").keeping_whole();
        assert_eq!(r.topic_name_in_place(FIELD), Ok(1));
        assert_eq!(r.binary(FIELD).expect("tail"), &b"b"[..]);
        let (buf, pos) = r.into_buffer();
        assert_eq!((&buf[..], pos), (&b"\x00\x01a\x00\x01b"[..], 6));
    }

    #[test]
    fn a_topic_left_in_place_is_still_validated() {
        let mut r = reader(b"\x00\x03a/+");
        assert_eq!(
            r.topic_name_in_place(FIELD),
            Err(DecodeError::WildcardInTopicName { field: FIELD })
        );
        let mut r = reader(b"\x00\x05a");
        assert_eq!(
            r.topic_name_in_place(FIELD),
            Err(DecodeError::UnexpectedEnd { field: FIELD })
        );
    }
}
