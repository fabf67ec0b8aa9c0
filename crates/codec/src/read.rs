//! `Reader`: a cursor over one frame's `Bytes` that hands out zero-copy slices and turns every
//! short read into [`DecodeError::UnexpectedEnd`].
//!
//! The reader advances one `Bytes` and can hide a tail of it, so a bounded sub-read (a property
//! block) needs no handle of its own: every `Bytes` handle costs an atomic reference-count
//! update, which is the dominant cost of decoding small packets.

use bytes::{Buf, Bytes};

use crate::packet::PacketType;
use crate::string::{self, MqttStr};
use crate::varint::{self, Varint};
use crate::{DecodeError, PacketId};

pub(crate) struct Reader {
    buf: Bytes,
    /// Bytes at the end of `buf` outside the current limit.
    hidden: usize,
}

impl Reader {
    #[inline]
    pub(crate) fn new(buf: Bytes) -> Self {
        Self { buf, hidden: 0 }
    }

    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.hidden
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `len` unread bytes, borrowed.
    #[inline]
    fn peek(&self, len: usize, field: &'static str) -> Result<&[u8], DecodeError> {
        if self.remaining() < len {
            return Err(DecodeError::UnexpectedEnd { field });
        }
        Ok(&self.buf[..len])
    }

    #[inline]
    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        self.peek(1, field)?;
        Ok(self.buf.get_u8())
    }

    #[inline]
    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        self.peek(2, field)?;
        Ok(self.buf.get_u16())
    }

    #[inline]
    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        self.peek(4, field)?;
        Ok(self.buf.get_u32())
    }

    pub(crate) fn varint(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let visible = self.remaining();
        match varint::parse(&self.buf[..visible]) {
            Varint::Complete { value, len } => {
                self.buf.advance(len);
                Ok(value)
            }
            Varint::Incomplete => Err(DecodeError::UnexpectedEnd { field }),
            Varint::TooLong => Err(DecodeError::MalformedVariableByteInteger { field }),
        }
    }

    /// The next `len` bytes as a shared slice (one reference-count increment).
    #[inline]
    pub(crate) fn take(&mut self, len: usize, field: &'static str) -> Result<Bytes, DecodeError> {
        self.peek(len, field)?;
        Ok(self.buf.split_to(len))
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
        let outer_hidden = self.hidden;
        self.hidden = self.buf.len() - len;
        let result = read(self);
        let consumed_all = self.is_empty();
        self.hidden = outer_hidden;
        let value = result?;
        if !consumed_all {
            return Err(DecodeError::UnexpectedEnd { field });
        }
        Ok(value)
    }

    /// Everything left, consuming the reader (no reference-count update).
    #[inline]
    pub(crate) fn rest(self) -> Bytes {
        debug_assert_eq!(
            self.hidden, 0,
            "invariant: rest() is not called inside limited()"
        );
        self.buf
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
