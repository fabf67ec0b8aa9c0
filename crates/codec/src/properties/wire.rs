//! Reading one property from the wire, the decode loop over a properties block, and writing a
//! block through the sinks.

use std::num::{NonZeroU16, NonZeroU32};

use bytes::BytesMut;

use super::{BufSink, LenSink, PayloadFormat, Property, PropertyId, PropertySet};
use crate::read::Reader;
use crate::{DecodeError, EncodeError, QoS, SubscriptionId, write};

const FIELD: &str = "properties";

/// Reads a properties block (length prefix included) into `T`. `context` names the packet in
/// errors. Rejects unknown, not-allowed and duplicated properties.
pub(crate) fn decode_properties<T: PropertySet>(
    reader: &mut Reader,
    context: &'static str,
) -> Result<T, DecodeError> {
    let len = reader.varint("property length")? as usize;
    if len == 0 {
        return Ok(T::default());
    }
    reader.limited(len, FIELD, |block| read_block(block, context))
}

fn read_block<T: PropertySet>(block: &mut Reader, context: &'static str) -> Result<T, DecodeError> {
    let mut seen: u64 = 0;
    let mut set = T::default();
    while !block.is_empty() {
        let property = read_property(block)?;
        let id = property.id();
        let bit = 1u64 << (id as u8);
        let repeatable = id == PropertyId::UserProperty
            || (id == PropertyId::SubscriptionIdentifier && T::REPEATED_SUBSCRIPTION_IDS);
        if seen & bit != 0 && !repeatable {
            return Err(DecodeError::DuplicateProperty { id });
        }
        seen |= bit;
        set.apply(property)
            .map_err(|rejected| DecodeError::PropertyNotAllowed {
                id: rejected.id(),
                context,
            })?;
    }
    set.check(context)?;
    Ok(set)
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

fn invalid(id: PropertyId, value: u32) -> DecodeError {
    DecodeError::InvalidPropertyValue { id, value }
}

fn flag(reader: &mut Reader, id: PropertyId) -> Result<bool, DecodeError> {
    match reader.u8(FIELD)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(invalid(id, u32::from(other))),
    }
}

fn read_property(reader: &mut Reader) -> Result<Property, DecodeError> {
    use Property as P;
    use PropertyId as I;
    let raw = reader.varint("property identifier")?;
    let id = PropertyId::from_u32(raw).ok_or(DecodeError::UnknownProperty { id: raw })?;
    let property = match id {
        I::PayloadFormatIndicator => P::PayloadFormatIndicator(match reader.u8(FIELD)? {
            0 => PayloadFormat::Unspecified,
            1 => PayloadFormat::Utf8,
            other => return Err(invalid(id, u32::from(other))),
        }),
        I::MessageExpiryInterval => P::MessageExpiryInterval(reader.u32(FIELD)?),
        I::ContentType => P::ContentType(reader.string("content type")?),
        I::ResponseTopic => {
            let topic = reader.topic_name("response topic")?;
            if topic.is_empty() {
                return Err(DecodeError::EmptyTopicName {
                    field: "response topic",
                });
            }
            P::ResponseTopic(topic)
        }
        I::CorrelationData => P::CorrelationData(reader.binary("correlation data")?),
        I::SubscriptionIdentifier => {
            let value = reader.varint("subscription identifier")?;
            P::SubscriptionIdentifier(SubscriptionId::new(value).ok_or(invalid(id, value))?)
        }
        I::SessionExpiryInterval => P::SessionExpiryInterval(reader.u32(FIELD)?),
        I::AssignedClientIdentifier => {
            P::AssignedClientIdentifier(reader.string("assigned client identifier")?)
        }
        I::ServerKeepAlive => P::ServerKeepAlive(reader.u16(FIELD)?),
        I::AuthenticationMethod => P::AuthenticationMethod(reader.string("authentication method")?),
        I::AuthenticationData => P::AuthenticationData(reader.binary("authentication data")?),
        I::RequestProblemInformation => P::RequestProblemInformation(flag(reader, id)?),
        I::WillDelayInterval => P::WillDelayInterval(reader.u32(FIELD)?),
        I::RequestResponseInformation => P::RequestResponseInformation(flag(reader, id)?),
        I::ResponseInformation => P::ResponseInformation(reader.string("response information")?),
        I::ServerReference => P::ServerReference(reader.string("server reference")?),
        I::ReasonString => P::ReasonString(reader.string("reason string")?),
        I::ReceiveMaximum => {
            let value = reader.u16(FIELD)?;
            P::ReceiveMaximum(NonZeroU16::new(value).ok_or(invalid(id, 0))?)
        }
        I::TopicAliasMaximum => P::TopicAliasMaximum(reader.u16(FIELD)?),
        I::TopicAlias => {
            let value = reader.u16(FIELD)?;
            P::TopicAlias(NonZeroU16::new(value).ok_or(DecodeError::TopicAliasZero)?)
        }
        I::MaximumQoS => P::MaximumQoS(match reader.u8(FIELD)? {
            0 => QoS::AtMostOnce,
            1 => QoS::AtLeastOnce,
            other => return Err(invalid(id, u32::from(other))),
        }),
        I::RetainAvailable => P::RetainAvailable(flag(reader, id)?),
        I::UserProperty => {
            let name = reader.string("user property name")?;
            P::User(name, reader.string("user property value")?)
        }
        I::MaximumPacketSize => {
            let value = reader.u32(FIELD)?;
            P::MaximumPacketSize(NonZeroU32::new(value).ok_or(invalid(id, 0))?)
        }
        I::WildcardSubscriptionAvailable => P::WildcardSubscriptionAvailable(flag(reader, id)?),
        I::SubscriptionIdentifierAvailable => P::SubscriptionIdentifierAvailable(flag(reader, id)?),
        I::SharedSubscriptionAvailable => P::SharedSubscriptionAvailable(flag(reader, id)?),
    };
    Ok(property)
}

impl Property {
    pub(crate) fn id(&self) -> PropertyId {
        use Property as P;
        use PropertyId as I;
        match self {
            P::PayloadFormatIndicator(_) => I::PayloadFormatIndicator,
            P::MessageExpiryInterval(_) => I::MessageExpiryInterval,
            P::ContentType(_) => I::ContentType,
            P::ResponseTopic(_) => I::ResponseTopic,
            P::CorrelationData(_) => I::CorrelationData,
            P::SubscriptionIdentifier(_) => I::SubscriptionIdentifier,
            P::SessionExpiryInterval(_) => I::SessionExpiryInterval,
            P::AssignedClientIdentifier(_) => I::AssignedClientIdentifier,
            P::ServerKeepAlive(_) => I::ServerKeepAlive,
            P::AuthenticationMethod(_) => I::AuthenticationMethod,
            P::AuthenticationData(_) => I::AuthenticationData,
            P::RequestProblemInformation(_) => I::RequestProblemInformation,
            P::WillDelayInterval(_) => I::WillDelayInterval,
            P::RequestResponseInformation(_) => I::RequestResponseInformation,
            P::ResponseInformation(_) => I::ResponseInformation,
            P::ServerReference(_) => I::ServerReference,
            P::ReasonString(_) => I::ReasonString,
            P::ReceiveMaximum(_) => I::ReceiveMaximum,
            P::TopicAliasMaximum(_) => I::TopicAliasMaximum,
            P::TopicAlias(_) => I::TopicAlias,
            P::MaximumQoS(_) => I::MaximumQoS,
            P::RetainAvailable(_) => I::RetainAvailable,
            P::User(..) => I::UserProperty,
            P::MaximumPacketSize(_) => I::MaximumPacketSize,
            P::WildcardSubscriptionAvailable(_) => I::WildcardSubscriptionAvailable,
            P::SubscriptionIdentifierAvailable(_) => I::SubscriptionIdentifierAvailable,
            P::SharedSubscriptionAvailable(_) => I::SharedSubscriptionAvailable,
        }
    }
}
