//! Properties of the message-level packets: PUBLISH, the acknowledgements, SUBSCRIBE and
//! UNSUBSCRIBE.

use std::num::NonZeroU16;

use bytes::Bytes;

use super::{
    AppProperties, PayloadFormat, PropertyId, PropertyId as I, PropertySet, PropertySink,
    UserProperty, is_application, value,
};
use crate::read::Reader;
use crate::string::MqttStr;
use crate::{DecodeError, SubscriptionId};

/// Properties of PUBLISH (MQTT 5.0 section 3.3.2.3). Empty properties allocate nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PublishProperties {
    /// Payload Format Indicator.
    pub payload_format: Option<PayloadFormat>,
    /// Message Expiry Interval in seconds.
    pub message_expiry_interval: Option<u32>,
    /// Topic Alias.
    pub topic_alias: Option<NonZeroU16>,
    /// Subscription Identifiers (server to client only), in order.
    pub subscription_identifiers: Vec<SubscriptionId>,
    /// Response Topic, Correlation Data, User Properties and Content Type: what subscribers
    /// get as the publisher sent it.
    pub application: AppProperties,
}

impl PublishProperties {
    /// No property set (the value of an empty [`PublishPropertiesBox`]).
    pub const EMPTY: Self = Self {
        payload_format: None,
        message_expiry_interval: None,
        topic_alias: None,
        subscription_identifiers: Vec::new(),
        application: AppProperties::EMPTY,
    };

    /// Whether no property is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::EMPTY
    }
}

static EMPTY_PUBLISH_PROPERTIES: PublishProperties = PublishProperties::EMPTY;

/// The properties of a [`crate::Publish`] behind one pointer that is null while there are none:
/// a 3.1.1 PUBLISH, or a 5.0 one without properties, allocates nothing for them, and the
/// packet stays small (inline, the 160-byte struct more than doubled every `Packet`, and
/// moving a decoded packet cost more than decoding it).
///
/// Reading goes through `Deref` (`publish.properties.topic_alias`). Writing is explicit,
/// because it may allocate: [`Self::make_mut`] always gives a set to write to,
/// [`Self::get_mut`] only an existing one.
#[derive(Clone, Default)]
pub struct PublishPropertiesBox(Option<Box<PublishProperties>>);

impl PublishPropertiesBox {
    /// Boxes `properties` (nothing is allocated if they are empty).
    pub fn new(properties: PublishProperties) -> Self {
        if properties.is_empty() {
            Self(None)
        } else {
            Self(Some(Box::new(properties)))
        }
    }

    /// A boxed set read from the wire (`None` when the block was empty).
    pub(crate) fn from_decoded(properties: Option<Box<PublishProperties>>) -> Self {
        Self(properties)
    }

    /// The properties to modify, allocated first if there were none.
    pub fn make_mut(&mut self) -> &mut PublishProperties {
        self.0.get_or_insert_with(Box::default)
    }

    /// The properties to modify if any were allocated (never allocates).
    pub fn get_mut(&mut self) -> Option<&mut PublishProperties> {
        self.0.as_deref_mut()
    }

    /// The properties, unboxed.
    pub fn into_inner(self) -> PublishProperties {
        self.0
            .map_or_else(PublishProperties::default, |boxed| *boxed)
    }
}

impl std::ops::Deref for PublishPropertiesBox {
    type Target = PublishProperties;

    #[inline]
    fn deref(&self) -> &PublishProperties {
        self.0.as_deref().unwrap_or(&EMPTY_PUBLISH_PROPERTIES)
    }
}

impl From<PublishProperties> for PublishPropertiesBox {
    fn from(properties: PublishProperties) -> Self {
        Self::new(properties)
    }
}

impl PartialEq for PublishPropertiesBox {
    /// Equal when the properties are (an empty box equals a box of an empty set).
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for PublishPropertiesBox {}

impl std::fmt::Debug for PublishPropertiesBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl PropertySet for PublishProperties {
    const REPEATED_SUBSCRIPTION_IDS: bool = true;

    fn read(&mut self, id: PropertyId, r: &mut Reader) -> Result<bool, DecodeError> {
        match id {
            I::PayloadFormatIndicator => self.payload_format = Some(value::payload_format(r)?),
            I::MessageExpiryInterval => self.message_expiry_interval = Some(value::four(r)?),
            I::TopicAlias => self.topic_alias = Some(value::topic_alias(r)?),
            I::SubscriptionIdentifier => self
                .subscription_identifiers
                .push(value::subscription_id(r)?),
            _ if is_application(id) => {
                let len = value::application_in_place(id, r)?;
                self.application.count_decoded(1 + len);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn keep_block(&mut self, block: impl FnOnce() -> Option<Bytes>) {
        if !self.application.is_empty() {
            self.application.set_decoded_block(block());
        }
    }

    fn write_to<S: PropertySink>(&self, s: &mut S) {
        self.write_shared(s);
        self.write_per_subscriber(s);
    }
}

impl PublishProperties {
    /// The properties that are the same for every subscriber of a message.
    pub(crate) fn write_shared<S: PropertySink>(&self, s: &mut S) {
        s.opt_byte(
            I::PayloadFormatIndicator,
            self.payload_format.map(|f| f as u8),
        );
        s.application(&self.application);
    }

    /// The properties a broker sets per subscriber: expiry, alias, subscription identifiers.
    pub(crate) fn write_per_subscriber<S: PropertySink>(&self, s: &mut S) {
        write_routing(
            s,
            self.message_expiry_interval,
            self.topic_alias,
            &self.subscription_identifiers,
        );
    }
}

/// Writes the per-subscriber PUBLISH properties.
pub(crate) fn write_routing<S: PropertySink>(
    s: &mut S,
    message_expiry_interval: Option<u32>,
    topic_alias: Option<NonZeroU16>,
    subscription_identifiers: &[SubscriptionId],
) {
    s.opt_four(I::MessageExpiryInterval, message_expiry_interval);
    s.opt_two(I::TopicAlias, topic_alias.map(NonZeroU16::get));
    for id in subscription_identifiers {
        s.varint(I::SubscriptionIdentifier, id.get());
    }
}

/// Properties of PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK and UNSUBACK: a reason string and
/// user properties.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AckProperties {
    /// Reason String.
    pub reason_string: Option<MqttStr>,
    /// User Properties, in order.
    pub user_properties: Vec<UserProperty>,
}

impl AckProperties {
    /// Whether no property is set.
    pub fn is_empty(&self) -> bool {
        self.reason_string.is_none() && self.user_properties.is_empty()
    }
}

impl PropertySet for AckProperties {
    fn read(&mut self, id: PropertyId, r: &mut Reader) -> Result<bool, DecodeError> {
        match id {
            I::ReasonString => self.reason_string = Some(value::string(r, "reason string")?),
            I::UserProperty => value::push_user_property(&mut self.user_properties, r)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn write_to<S: PropertySink>(&self, s: &mut S) {
        s.opt_string(I::ReasonString, self.reason_string.as_ref());
        s.user_properties(&self.user_properties);
    }
}

/// Properties of SUBSCRIBE (MQTT 5.0 section 3.8.2.1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscribeProperties {
    /// Subscription Identifier for every filter of this SUBSCRIBE.
    pub subscription_identifier: Option<SubscriptionId>,
    /// User Properties, in order.
    pub user_properties: Vec<UserProperty>,
}

impl PropertySet for SubscribeProperties {
    fn read(&mut self, id: PropertyId, r: &mut Reader) -> Result<bool, DecodeError> {
        match id {
            I::SubscriptionIdentifier => {
                self.subscription_identifier = Some(value::subscription_id(r)?)
            }
            I::UserProperty => value::push_user_property(&mut self.user_properties, r)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn write_to<S: PropertySink>(&self, s: &mut S) {
        if let Some(id) = self.subscription_identifier {
            s.varint(I::SubscriptionIdentifier, id.get());
        }
        s.user_properties(&self.user_properties);
    }
}

/// Properties of UNSUBSCRIBE (MQTT 5.0 section 3.10.2.1): user properties only.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UnsubscribeProperties {
    /// User Properties, in order.
    pub user_properties: Vec<UserProperty>,
}

impl PropertySet for UnsubscribeProperties {
    fn read(&mut self, id: PropertyId, r: &mut Reader) -> Result<bool, DecodeError> {
        match id {
            I::UserProperty => value::push_user_property(&mut self.user_properties, r)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn write_to<S: PropertySink>(&self, s: &mut S) {
        s.user_properties(&self.user_properties);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_box_reads_as_empty_properties_and_allocates_nothing() {
        let mut empty = PublishPropertiesBox::new(PublishProperties::default());
        assert!(empty.is_empty());
        assert_eq!(empty.topic_alias, None);
        assert!(empty.get_mut().is_none(), "no allocation to hand out");
        assert_eq!(empty, PublishPropertiesBox::default());
    }

    #[test]
    fn writing_allocates_and_equality_looks_at_the_properties() {
        let mut set = PublishPropertiesBox::default();
        set.make_mut().message_expiry_interval = Some(5);
        assert_eq!(set.message_expiry_interval, Some(5));
        assert_eq!(
            set.get_mut().map(|p| p.message_expiry_interval),
            Some(Some(5))
        );
        let expected = PublishProperties {
            message_expiry_interval: Some(5),
            ..PublishProperties::default()
        };
        assert_eq!(set, PublishPropertiesBox::from(expected.clone()));
        assert_eq!(set.clone().into_inner(), expected);
        set.make_mut().message_expiry_interval = None;
        assert_eq!(
            set,
            PublishPropertiesBox::default(),
            "a boxed empty set is empty"
        );
        assert_eq!(
            format!("{set:?}"),
            format!("{:?}", PublishProperties::default())
        );
    }
}
