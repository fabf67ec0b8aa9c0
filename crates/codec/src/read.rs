//! `Reader`: a cursor over one frame's `Bytes` that hands out zero-copy slices and turns every
//! short read into [`DecodeError::UnexpectedEnd`].
//!
//! The reader moves an index over one `Bytes` and can narrow its end, so a bounded sub-read (a
//! property block) needs no handle of its own, and the buffer comes back whole at the end (a
//! PUBLISH keeps it as its one handle): every `Bytes` handle costs an atomic reference-count
//! update, which is the dominant cost of decoding small packets.

use std::ops::Range;

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
        let range = self.consume(N, field)?;
        Ok(self.buf[range]
            .try_into()
            .expect("invariant: consume returns exactly N bytes"))
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

    /// The range of the next `len` bytes, consumed: the one bounds check of a field (the
    /// range is within `self.end`, hence within `buf`).
    #[inline]
    fn consume(&mut self, len: usize, field: &'static str) -> Result<Range<usize>, DecodeError> {
        let start = self.pos;
        if self.end - start < len {
            return Err(DecodeError::UnexpectedEnd { field });
        }
        self.pos = start + len;
        Ok(start..self.pos)
    }

    /// A handle on `range` of the buffer (one reference-count increment, none if it is empty
    /// or ends the buffer).
    #[inline]
    fn handle(&mut self, range: Range<usize>) -> Bytes {
        if self.lend_tail && range.end == self.buf.len() {
            // Nothing is left to read at any level: hand over the reader's handle.
            let mut tail = std::mem::take(&mut self.buf);
            tail.advance(range.start);
            (self.pos, self.end) = (0, 0);
            return tail;
        }
        self.buf.slice(range)
    }

    /// A variable byte integer that is nearly always one byte (a property identifier): a byte
    /// without the continuation bit is read directly, anything else by [`Self::varint`].
    #[inline]
    pub(crate) fn short_varint(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        match self.buf[..self.end].get(self.pos) {
            Some(&byte) if byte < 0x80 => {
                self.pos += 1;
                Ok(u32::from(byte))
            }
            _ => self.varint(field),
        }
    }

    /// The next `len` bytes as a shared slice (one reference-count increment, none if they are
    /// empty or end the buffer).
    #[inline]
    pub(crate) fn take(&mut self, len: usize, field: &'static str) -> Result<Bytes, DecodeError> {
        let range = self.consume(len, field)?;
        Ok(self.handle(range))
    }

    /// The next `len` bytes, borrowed and consumed (no handle).
    #[inline]
    fn slice_in_place(&mut self, len: usize, field: &'static str) -> Result<&[u8], DecodeError> {
        let range = self.consume(len, field)?;
        Ok(&self.buf[range])
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
        let range = self.consume(len, field)?;
        string::validate(&self.buf[range.clone()], field)?;
        Ok(MqttStr::from_validated(self.handle(range)))
    }

    /// A UTF-8 Encoded String validated and skipped; its size with its length prefix returned
    /// (no handle).
    #[inline]
    pub(crate) fn string_in_place(&mut self, field: &'static str) -> Result<usize, DecodeError> {
        let len = usize::from(self.u16(field)?);
        string::validate(self.slice_in_place(len, field)?, field)?;
        Ok(2 + len)
    }

    /// A topic name: a string without wildcards, possibly empty.
    #[inline]
    pub(crate) fn topic_name(&mut self, field: &'static str) -> Result<MqttStr, DecodeError> {
        let len = usize::from(self.u16(field)?);
        let range = self.consume(len, field)?;
        string::validate_topic_name(&self.buf[range.clone()], field)?;
        Ok(MqttStr::from_validated(self.handle(range)))
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

    /// Index of the next unread byte, for [`Self::handle_of`].
    #[inline]
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// A handle on `range` of the buffer, read before; `None` if the buffer was handed over
    /// since (only a read of the buffer's tail as a handle does that).
    pub(crate) fn handle_of(&self, range: Range<usize>) -> Option<Bytes> {
        (range.end <= self.buf.len()).then(|| self.buf.slice(range))
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

    /// What `Reader::string` must answer for `bytes`, from the standard library's UTF-8 check
    /// and a byte search (independent of the word scan).
    fn expected(bytes: &[u8]) -> Result<(), DecodeError> {
        if std::str::from_utf8(bytes).is_err() {
            Err(DecodeError::InvalidUtf8 { field: FIELD })
        } else if bytes.contains(&0) {
            Err(DecodeError::NullCharacter { field: FIELD })
        } else {
            Ok(())
        }
    }

    fn read_string(bytes: &[u8], trailing: &[u8]) -> Result<MqttStr, DecodeError> {
        let mut frame = (bytes.len() as u16).to_be_bytes().to_vec();
        frame.extend_from_slice(bytes);
        frame.extend_from_slice(trailing);
        Reader::new(Bytes::from(frame)).string(FIELD)
    }

    #[test]
    fn strings_of_every_short_length_are_checked_at_every_position() {
        // U+0000, multi-byte characters, a surrogate, an overlong form, a lone continuation
        // byte, a truncated sequence, a byte no UTF-8 holds, a code point above U+10FFFF.
        let inserts: [&[u8]; 10] = [
            b"\0",
            "\u{e9}".as_bytes(),
            "\u{4e2d}".as_bytes(),
            "\u{2A6D4}".as_bytes(),
            b"\xED\xA0\x80",
            b"\xC0\x80",
            b"\x80",
            b"\xE4\xB8",
            b"\xFF",
            b"\xF4\x90\x80\x80",
        ];
        for len in 0..=19 {
            for insert in inserts.iter().filter(|i| i.len() <= len) {
                for at in 0..=len - insert.len() {
                    let mut bytes = vec![b'x'; len];
                    bytes[at..at + insert.len()].copy_from_slice(insert);
                    for trailing in [&b""[..], b"z"] {
                        let read = read_string(&bytes, trailing);
                        assert_eq!(read.clone().map(|_| ()), expected(&bytes), "{bytes:?}");
                        if let Ok(text) = read {
                            assert_eq!(text.as_bytes(), &bytes[..]);
                        }
                    }
                }
            }
            let plain = vec![b'x'; len];
            assert_eq!(
                read_string(&plain, b"").expect("ASCII").as_bytes(),
                &plain[..]
            );
        }
    }

    #[test]
    fn a_string_of_the_longest_length_is_read_and_one_past_the_end_is_refused() {
        let mut bytes = vec![b'y'; usize::from(u16::MAX)];
        assert_eq!(read_string(&bytes, b"").expect("longest").len(), 65_535);
        bytes[65_534] = 0;
        assert_eq!(
            read_string(&bytes, b""),
            Err(DecodeError::NullCharacter { field: FIELD })
        );
        let mut r = reader(b"\x00\x04abc");
        assert_eq!(
            r.string(FIELD),
            Err(DecodeError::UnexpectedEnd { field: FIELD })
        );
        let mut r = reader(b"\x00\x03a+c");
        assert_eq!(
            r.topic_name(FIELD),
            Err(DecodeError::WildcardInTopicName { field: FIELD })
        );
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
