//! Reading one property from the wire, the decode loop over a properties block, and writing a
//! block through the sinks.

use bytes::BytesMut;

use super::{BufSink, LenSink, PropertyId, PropertySet};
use crate::read::Reader;
use crate::{DecodeError, EncodeError, ProtocolVersion, write};

const FIELD: &str = "properties";

/// Reads a properties block (length prefix included) into `T`. `context` names the packet in
/// errors. Rejects unknown, not-allowed and duplicated properties.
pub(crate) fn decode_properties<T: PropertySet>(
    reader: &mut Reader,
    context: &'static str,
) -> Result<T, DecodeError> {
    let mut set = T::default();
    let len = reader.varint("property length")? as usize;
    if len > 0 {
        read_set(reader, len, &mut set, context)?;
    }
    Ok(set)
}

/// Like [`decode_properties`], into `set` where it lies (an empty set, a field of a packet
/// already in its box): a large set is not built apart and then moved.
pub(crate) fn decode_properties_into<T: PropertySet>(
    reader: &mut Reader,
    set: &mut T,
    context: &'static str,
) -> Result<(), DecodeError> {
    let len = reader.varint("property length")? as usize;
    if len > 0 {
        read_set(reader, len, set, context)?;
    }
    Ok(())
}

/// Like [`decode_properties`], into a box allocated only when the block is not empty (and
/// filled in place: the set is not moved through the results).
pub(crate) fn decode_boxed_properties<T: PropertySet>(
    reader: &mut Reader,
    context: &'static str,
) -> Result<Option<Box<T>>, DecodeError> {
    let len = reader.varint("property length")? as usize;
    if len == 0 {
        return Ok(None);
    }
    let mut set = Box::<T>::default();
    read_set(reader, len, &mut *set, context)?;
    Ok(Some(set))
}

/// Reads the `len`-byte block at the reader into `set`, then lets `set` keep the block.
fn read_set<T: PropertySet>(
    reader: &mut Reader,
    len: usize,
    set: &mut T,
    context: &'static str,
) -> Result<(), DecodeError> {
    let start = reader.position();
    reader.limited(len, FIELD, |block| read_block(block, set, context))?;
    set.keep_block(|| reader.handle_of(start..start + len));
    Ok(())
}

fn read_block<T: PropertySet>(
    block: &mut Reader,
    set: &mut T,
    context: &'static str,
) -> Result<(), DecodeError> {
    let mut seen: u64 = 0;
    while !block.is_empty() {
        let raw = block.short_varint("property identifier")?;
        let id = PropertyId::from_u32(raw).ok_or(DecodeError::UnknownProperty { id: raw })?;
        let bit = 1u64 << (id as u8);
        let repeatable = id == PropertyId::UserProperty
            || (id == PropertyId::SubscriptionIdentifier && T::REPEATED_SUBSCRIPTION_IDS);
        if seen & bit != 0 && !repeatable {
            return Err(DecodeError::DuplicateProperty { id });
        }
        seen |= bit;
        if !set.read(id, block)? {
            return Err(DecodeError::PropertyNotAllowed { id, context });
        }
    }
    set.check(context)
}

/// Reads a properties block for 5.0; for 3.x, which has none, the empty set.
#[inline]
pub(crate) fn decode_if_v5<T: PropertySet>(
    reader: &mut Reader,
    protocol: ProtocolVersion,
    context: &'static str,
) -> Result<T, DecodeError> {
    if protocol.is_v5() {
        decode_properties(reader, context)
    } else {
        Ok(T::default())
    }
}

/// For 5.0, the size of `set`'s block with its length prefix and the size of the block alone;
/// `(0, 0)` for 3.x.
pub(crate) fn measure_if_v5<T: PropertySet>(
    set: &T,
    protocol: ProtocolVersion,
) -> Result<(usize, usize), EncodeError> {
    if !protocol.is_v5() {
        return Ok((0, 0));
    }
    let len = encoded_block_len(set)?;
    Ok((write::len_prefix(len) + len, len))
}

/// The size of `set`'s properties (without the length prefix).
pub(crate) fn encoded_block_len<T: PropertySet>(set: &T) -> Result<usize, EncodeError> {
    let mut sink = LenSink::default();
    set.write_to(&mut sink);
    match sink.error {
        Some(error) => Err(error),
        None => Ok(sink.len),
    }
}

/// Writes the length prefix and `set`'s properties; `len` comes from [`encoded_block_len`].
pub(crate) fn write_block<T: PropertySet>(buf: &mut BytesMut, set: &T, len: usize) {
    write::put_len(buf, len);
    set.write_to(&mut BufSink(buf));
}

/// The value reader of every property, one function per identifier (or per group of
/// identifiers with the same wire type and range), so each property is read and range-checked
/// the same way in every packet.
pub(crate) mod value {
    use std::num::{NonZeroU16, NonZeroU32};

    use bytes::Bytes;

    use super::FIELD;
    use crate::properties::{PayloadFormat, PropertyId, UserProperty};
    use crate::read::Reader;
    use crate::string::MqttStr;
    use crate::{DecodeError, QoS, SubscriptionId};

    fn invalid(id: PropertyId, value: u32) -> DecodeError {
        DecodeError::InvalidPropertyValue { id, value }
    }

    /// A Byte property that is 0 or 1 (Request Problem/Response Information, the
    /// "available" flags of CONNACK).
    pub(crate) fn flag(reader: &mut Reader, id: PropertyId) -> Result<bool, DecodeError> {
        match reader.u8(FIELD)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(invalid(id, u32::from(other))),
        }
    }

    /// A Four Byte Integer property (expiry and delay intervals, any value).
    pub(crate) fn four(reader: &mut Reader) -> Result<u32, DecodeError> {
        reader.u32(FIELD)
    }

    /// A Two Byte Integer property with any value (Server Keep Alive, Topic Alias Maximum).
    pub(crate) fn two(reader: &mut Reader) -> Result<u16, DecodeError> {
        reader.u16(FIELD)
    }

    /// A UTF-8 string property.
    pub(crate) fn string(reader: &mut Reader, field: &'static str) -> Result<MqttStr, DecodeError> {
        reader.string(field)
    }

    /// A Binary Data property.
    pub(crate) fn binary(reader: &mut Reader, field: &'static str) -> Result<Bytes, DecodeError> {
        reader.binary(field)
    }

    pub(crate) fn payload_format(reader: &mut Reader) -> Result<PayloadFormat, DecodeError> {
        match reader.u8(FIELD)? {
            0 => Ok(PayloadFormat::Unspecified),
            1 => Ok(PayloadFormat::Utf8),
            other => Err(invalid(
                PropertyId::PayloadFormatIndicator,
                u32::from(other),
            )),
        }
    }

    /// Response Topic: a non-empty topic name.
    pub(crate) fn response_topic(reader: &mut Reader) -> Result<MqttStr, DecodeError> {
        let field = "response topic";
        let topic = reader.topic_name(field)?;
        if topic.is_empty() {
            return Err(DecodeError::EmptyTopicName { field });
        }
        Ok(topic)
    }

    pub(crate) fn subscription_id(reader: &mut Reader) -> Result<SubscriptionId, DecodeError> {
        let value = reader.varint("subscription identifier")?;
        SubscriptionId::new(value).ok_or(invalid(PropertyId::SubscriptionIdentifier, value))
    }

    pub(crate) fn receive_maximum(reader: &mut Reader) -> Result<NonZeroU16, DecodeError> {
        NonZeroU16::new(reader.u16(FIELD)?).ok_or(invalid(PropertyId::ReceiveMaximum, 0))
    }

    pub(crate) fn maximum_packet_size(reader: &mut Reader) -> Result<NonZeroU32, DecodeError> {
        NonZeroU32::new(reader.u32(FIELD)?).ok_or(invalid(PropertyId::MaximumPacketSize, 0))
    }

    pub(crate) fn topic_alias(reader: &mut Reader) -> Result<NonZeroU16, DecodeError> {
        NonZeroU16::new(reader.u16(FIELD)?).ok_or(DecodeError::TopicAliasZero)
    }

    /// Maximum QoS: 0 or 1.
    pub(crate) fn maximum_qos(reader: &mut Reader) -> Result<QoS, DecodeError> {
        match reader.u8(FIELD)? {
            0 => Ok(QoS::AtMostOnce),
            1 => Ok(QoS::AtLeastOnce),
            other => Err(invalid(PropertyId::MaximumQoS, u32::from(other))),
        }
    }

    pub(crate) fn user_property(reader: &mut Reader) -> Result<UserProperty, DecodeError> {
        let name = reader.string("user property name")?;
        Ok((name, reader.string("user property value")?))
    }

    /// Validates an application property of a PUBLISH where it lies ([`super::super::app`]);
    /// returns the size of its value.
    pub(crate) fn application_in_place(
        id: PropertyId,
        reader: &mut Reader,
    ) -> Result<usize, DecodeError> {
        match id {
            PropertyId::ResponseTopic => {
                let field = "response topic";
                let len = usize::from(reader.topic_name_in_place(field)?);
                if len == 0 {
                    return Err(DecodeError::EmptyTopicName { field });
                }
                Ok(2 + len)
            }
            PropertyId::CorrelationData => {
                Ok(2 + reader.binary_in_place("correlation data")?.len())
            }
            PropertyId::ContentType => reader.string_in_place("content type"),
            _ => {
                let name = reader.string_in_place("user property name")?;
                Ok(name + reader.string_in_place("user property value")?)
            }
        }
    }

    /// Reads a User Property onto `list`. The first one allocates room for a few directly:
    /// `push` onto an empty vector takes the amortized growth path, which costs more than the
    /// allocation itself.
    pub(crate) fn push_user_property(
        list: &mut Vec<UserProperty>,
        reader: &mut Reader,
    ) -> Result<(), DecodeError> {
        let pair = user_property(reader)?;
        if list.capacity() == 0 {
            *list = Vec::with_capacity(FIRST_USER_PROPERTIES);
        }
        list.push(pair);
        Ok(())
    }

    /// Room made by the first User Property of a set (what `push` would make).
    const FIRST_USER_PROPERTIES: usize = 4;
}
