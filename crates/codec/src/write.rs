//! Writing primitives and length checks shared by every packet encoder.

use bytes::{BufMut, Bytes, BytesMut};

use crate::EncodeError;
use crate::string::MqttStr;
use crate::varint::{self, MAX_VARIABLE_BYTE_INTEGER};

/// Appends a UTF-8 Encoded String (length checked when the `MqttStr` was built).
#[inline]
pub(crate) fn put_str(buf: &mut BytesMut, text: &MqttStr) {
    put_binary(buf, text.as_bytes());
}

/// Appends Binary Data whose length was checked by [`binary_len`].
#[inline]
pub(crate) fn put_binary(buf: &mut BytesMut, data: &[u8]) {
    buf.put_u16(data.len() as u16);
    buf.put_slice(data);
}

/// The encoded size of a UTF-8 Encoded String.
#[inline]
pub(crate) fn str_len(text: &MqttStr) -> usize {
    2 + text.len()
}

/// The encoded size of Binary Data, or an error if it does not fit a two-byte length.
pub(crate) fn binary_len(field: &'static str, data: &Bytes) -> Result<usize, EncodeError> {
    if data.len() > usize::from(u16::MAX) {
        return Err(EncodeError::BinaryTooLong {
            field,
            len: data.len(),
        });
    }
    Ok(2 + data.len())
}

/// Checks that `remaining` fits the remaining-length field; returns the whole frame size.
pub(crate) fn frame_len(remaining: usize) -> Result<usize, EncodeError> {
    let value = u32::try_from(remaining)
        .ok()
        .filter(|v| *v <= MAX_VARIABLE_BYTE_INTEGER)
        .ok_or(EncodeError::PacketTooLarge {
            remaining_length: remaining,
        })?;
    Ok(1 + varint::encoded_len(value) + remaining)
}

/// Appends a fixed header; `remaining` was checked by [`frame_len`].
#[inline]
pub(crate) fn put_fixed_header(buf: &mut BytesMut, first_byte: u8, remaining: usize) {
    buf.put_u8(first_byte);
    varint::put(buf, remaining as u32);
}

/// Appends a variable byte integer for a length checked to fit.
#[inline]
pub(crate) fn put_len(buf: &mut BytesMut, len: usize) {
    varint::put(buf, len as u32);
}

/// The size of a length prefix for a properties block of `len` bytes.
#[inline]
pub(crate) fn len_prefix(len: usize) -> usize {
    varint::encoded_len(u32::try_from(len).unwrap_or(u32::MAX))
}
