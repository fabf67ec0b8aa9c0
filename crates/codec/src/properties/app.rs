//! [`AppProperties`]: the properties a PUBLISH carries from its publisher to its subscribers
//! unchanged (Response Topic, Correlation Data, User Properties, Content Type), kept in their
//! wire form.
//!
//! A decoded PUBLISH holds them as one handle on its validated property block, not a handle per
//! string and a vector of pairs (each handle is an atomic reference-count update, and those were
//! most of the cost of decoding a 5.0 PUBLISH); forwarding copies their bytes as they came.
//! Values are read from the block when asked for.

use bytes::{BufMut, Bytes, BytesMut};

use super::{PropertyId, UserProperty};
use crate::string::MqttStr;
use crate::{EncodeError, write};

/// Response Topic, Correlation Data, User Properties (in order) and Content Type of a PUBLISH.
#[derive(Clone, Default)]
pub struct AppProperties {
    /// A validated property block. Decoded: the PUBLISH's whole block, whose other properties
    /// are skipped when this one is read; built: these properties only.
    block: Bytes,
    /// Encoded size of these properties within `block`.
    len: u32,
}

/// Whether `id` is one of the properties [`AppProperties`] holds.
pub(crate) fn is_application(id: PropertyId) -> bool {
    matches!(
        id,
        PropertyId::ResponseTopic
            | PropertyId::CorrelationData
            | PropertyId::UserProperty
            | PropertyId::ContentType
    )
}

impl AppProperties {
    /// None set.
    pub const EMPTY: Self = Self {
        block: Bytes::new(),
        len: 0,
    };

    /// Properties to fill in, for a message this side sends.
    pub fn builder() -> AppPropertiesBuilder {
        AppPropertiesBuilder::default()
    }

    /// The properties of a decoded block: `len` bytes of application properties (counted by
    /// the decoder, which validated every property of `block`).
    pub(crate) fn from_block(block: Bytes, len: usize) -> Self {
        let len = u32::try_from(len).expect("invariant: a property block fits its varint length");
        Self { block, len }
    }

    /// Counts `len` bytes of an application property the decoder validated in place.
    pub(crate) fn count_decoded(&mut self, len: usize) {
        let len = u32::try_from(len).expect("invariant: a property fits its block");
        self.len += len;
    }

    /// Takes the decoded block the counted properties lie in. `None` (the reader no longer
    /// holds it) cannot happen: no property of a PUBLISH block is read as a handle, so the
    /// reader never hands its buffer over; were it to, the properties would read as none.
    pub(crate) fn set_decoded_block(&mut self, block: Option<Bytes>) {
        debug_assert!(block.is_some(), "invariant: the block is still held");
        match block {
            Some(block) => self.block = block,
            None => self.len = 0,
        }
    }

    /// Whether none is set.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Encoded size of these properties (identifiers included).
    #[inline]
    pub(crate) fn encoded_len(&self) -> usize {
        self.len as usize
    }

    /// Response Topic.
    pub fn response_topic(&self) -> Option<MqttStr> {
        self.string_of(PropertyId::ResponseTopic)
    }

    /// Correlation Data.
    pub fn correlation_data(&self) -> Option<Bytes> {
        self.find(PropertyId::CorrelationData)
            .map(|at| self.block.slice(at.value.clone()))
    }

    /// Content Type.
    pub fn content_type(&self) -> Option<MqttStr> {
        self.string_of(PropertyId::ContentType)
    }

    /// User Properties, in order.
    pub fn user_properties(&self) -> impl Iterator<Item = UserProperty> + '_ {
        self.entries()
            .filter(|at| at.id == PropertyId::UserProperty)
            .map(|at| {
                let name = at.value.start..at.value.start + at.first_len;
                let value = name.end + 2..at.value.end;
                (self.text(name), self.text(value))
            })
    }

    /// A copy in an allocation of its own holding these properties only (no longer sharing the
    /// buffer they were decoded from).
    pub fn detached(&self) -> Self {
        let mut buf = BytesMut::with_capacity(self.encoded_len());
        self.put(&mut buf);
        Self {
            block: buf.freeze(),
            len: self.len,
        }
    }

    /// Appends these properties as they are on the wire.
    pub(crate) fn put(&self, buf: &mut BytesMut) {
        for at in self.entries() {
            buf.put_slice(&self.block[at.whole.clone()]);
        }
    }

    fn string_of(&self, id: PropertyId) -> Option<MqttStr> {
        self.find(id).map(|at| self.text(at.value.clone()))
    }

    fn text(&self, range: std::ops::Range<usize>) -> MqttStr {
        MqttStr::from_validated(self.block.slice(range))
    }

    fn find(&self, id: PropertyId) -> Option<Entry> {
        self.entries().find(|at| at.id == id)
    }

    /// The application properties of the block, in order.
    fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        let mut at = 0;
        let block: &[u8] = if self.len == 0 { &[] } else { &self.block };
        std::iter::from_fn(move || {
            while at < block.len() {
                let entry = entry_at(block, at)?;
                at = entry.whole.end;
                if is_application(entry.id) {
                    return Some(entry);
                }
            }
            None
        })
    }
}

/// One property of a block: where it lies whole, and where its value lies (for a User
/// Property, both strings with the second's length prefix; `first_len` is the name's length).
struct Entry {
    id: PropertyId,
    whole: std::ops::Range<usize>,
    value: std::ops::Range<usize>,
    first_len: usize,
}

fn u16_at(block: &[u8], at: usize) -> Option<usize> {
    let bytes = block.get(at..at + 2)?;
    Some(usize::from(u16::from_be_bytes([bytes[0], bytes[1]])))
}

/// The property starting at `at` of a validated block (`None` past its end: a block this type
/// holds was validated, so that ends the walk only at the block's end).
fn entry_at(block: &[u8], at: usize) -> Option<Entry> {
    use PropertyId as I;
    let id = PropertyId::from_u32(u32::from(*block.get(at)?))?;
    let start = at + 1;
    let (value, first_len) = match id {
        I::ContentType | I::ResponseTopic | I::CorrelationData => {
            (start + 2..start + 2 + u16_at(block, start)?, 0)
        }
        I::UserProperty => {
            let name = u16_at(block, start)?;
            let value = u16_at(block, start + 2 + name)?;
            (start + 2..start + 2 + name + 2 + value, name)
        }
        I::PayloadFormatIndicator => (start..start + 1, 0),
        I::MessageExpiryInterval => (start..start + 4, 0),
        I::TopicAlias => (start..start + 2, 0),
        I::SubscriptionIdentifier => {
            let len = block[start..].iter().position(|b| b & 0x80 == 0)? + 1;
            (start..start + len, 0)
        }
        _ => return None,
    };
    (value.end <= block.len()).then_some(Entry {
        id,
        whole: at..value.end,
        value,
        first_len,
    })
}

impl PartialEq for AppProperties {
    /// Equal when the same properties come in the same order (whatever else the blocks hold).
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self
                .entries()
                .map(|at| &self.block[at.whole])
                .eq(other.entries().map(|at| &other.block[at.whole]))
    }
}

impl Eq for AppProperties {}

impl std::fmt::Debug for AppProperties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut set = f.debug_struct("AppProperties");
        if let Some(topic) = self.response_topic() {
            set.field("response_topic", &topic);
        }
        if let Some(data) = self.correlation_data() {
            set.field("correlation_data", &data);
        }
        let users: Vec<UserProperty> = self.user_properties().collect();
        if !users.is_empty() {
            set.field("user_properties", &users);
        }
        if let Some(kind) = self.content_type() {
            set.field("content_type", &kind);
        }
        set.finish()
    }
}

/// Builds [`AppProperties`]: written in the order Response Topic, Correlation Data, User
/// Properties (in the order given), Content Type.
#[derive(Debug, Default)]
pub struct AppPropertiesBuilder {
    response_topic: Option<MqttStr>,
    correlation_data: Option<Bytes>,
    user_properties: Vec<UserProperty>,
    content_type: Option<MqttStr>,
}

impl AppPropertiesBuilder {
    /// Sets the Response Topic.
    pub fn response_topic(mut self, topic: Option<MqttStr>) -> Self {
        self.response_topic = topic;
        self
    }

    /// Sets the Correlation Data.
    pub fn correlation_data(mut self, data: Option<Bytes>) -> Self {
        self.correlation_data = data;
        self
    }

    /// Adds User Properties after those given before.
    pub fn user_properties(mut self, pairs: impl IntoIterator<Item = UserProperty>) -> Self {
        self.user_properties.extend(pairs);
        self
    }

    /// Adds one User Property.
    pub fn user_property(mut self, name: MqttStr, value: MqttStr) -> Self {
        self.user_properties.push((name, value));
        self
    }

    /// Sets the Content Type.
    pub fn content_type(mut self, kind: Option<MqttStr>) -> Self {
        self.content_type = kind;
        self
    }

    /// The properties; fails if the Correlation Data does not fit its two-byte length.
    pub fn build(self) -> Result<AppProperties, EncodeError> {
        let mut buf = BytesMut::new();
        if let Some(topic) = &self.response_topic {
            put_string(&mut buf, PropertyId::ResponseTopic, topic);
        }
        if let Some(data) = &self.correlation_data {
            write::binary_len("correlation data", data)?;
            buf.put_u8(PropertyId::CorrelationData as u8);
            write::put_binary(&mut buf, data);
        }
        for (name, value) in &self.user_properties {
            put_string(&mut buf, PropertyId::UserProperty, name);
            write::put_str(&mut buf, value);
        }
        if let Some(kind) = &self.content_type {
            put_string(&mut buf, PropertyId::ContentType, kind);
        }
        let len = buf.len();
        Ok(AppProperties::from_block(buf.freeze(), len))
    }
}

fn put_string(buf: &mut BytesMut, id: PropertyId, text: &MqttStr) {
    buf.put_u8(id as u8);
    write::put_str(buf, text);
}

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;
