//! `Reader`: a cursor over one frame's `Bytes` that hands out zero-copy slices and turns every
//! short read into [`DecodeError::UnexpectedEnd`].

use bytes::{Buf, Bytes};

use crate::packet::PacketType;
use crate::string::{self, MqttStr};
use crate::varint::{self, Varint};
use crate::{DecodeError, PacketId};

pub(crate) struct Reader {
    buf: Bytes,
}

impl Reader {
    pub(crate) fn new(buf: Bytes) -> Self {
        Self { buf }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    fn need(&self, len: usize, field: &'static str) -> Result<(), DecodeError> {
        if self.buf.len() < len {
            return Err(DecodeError::UnexpectedEnd { field });
        }
        Ok(())
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        self.need(1, field)?;
        Ok(self.buf.get_u8())
    }

    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        self.need(2, field)?;
        Ok(self.buf.get_u16())
    }

    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        self.need(4, field)?;
        Ok(self.buf.get_u32())
    }

    pub(crate) fn varint(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        match varint::parse(&self.buf) {
            Varint::Complete { value, len } => {
                self.buf.advance(len);
                Ok(value)
            }
            Varint::Incomplete => Err(DecodeError::UnexpectedEnd { field }),
            Varint::TooLong => Err(DecodeError::MalformedVariableByteInteger { field }),
        }
    }

    /// The next `len` bytes as a shared slice.
    pub(crate) fn take(&mut self, len: usize, field: &'static str) -> Result<Bytes, DecodeError> {
        self.need(len, field)?;
        Ok(self.buf.split_to(len))
    }

    /// Binary Data: a two-byte length and that many bytes.
    pub(crate) fn binary(&mut self, field: &'static str) -> Result<Bytes, DecodeError> {
        let len = self.u16(field)?;
        self.take(usize::from(len), field)
    }

    /// A UTF-8 Encoded String.
    pub(crate) fn string(&mut self, field: &'static str) -> Result<MqttStr, DecodeError> {
        let bytes = self.binary(field)?;
        string::validate(&bytes, field)?;
        Ok(MqttStr::from_validated(bytes))
    }

    /// A topic name: a string without wildcards, possibly empty.
    pub(crate) fn topic_name(&mut self, field: &'static str) -> Result<MqttStr, DecodeError> {
        let bytes = self.binary(field)?;
        string::validate_topic_name(&bytes, field)?;
        Ok(MqttStr::from_validated(bytes))
    }

    /// A non-zero packet identifier.
    pub(crate) fn packet_id(&mut self, packet: PacketType) -> Result<PacketId, DecodeError> {
        let value = self.u16("packet identifier")?;
        PacketId::new(value).ok_or(DecodeError::ZeroPacketId { packet })
    }

    /// Everything left, consuming the reader.
    pub(crate) fn rest(self) -> Bytes {
        self.buf
    }

    /// Fails with [`DecodeError::TrailingBytes`] if anything is left.
    pub(crate) fn finish(self, packet: PacketType) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes {
                packet,
                extra: self.buf.len(),
            })
        }
    }
}
