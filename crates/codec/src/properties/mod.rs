//! MQTT 5.0 properties: identifiers with their wire types, the typed property read from the
//! wire, the generic decode loop (duplicates and not-allowed properties), and the length/write
//! sinks every per-packet property struct encodes through.

mod app;
mod connection;
pub(crate) mod message;
mod property_id;
mod wire;

use bytes::{BufMut, Bytes, BytesMut};

pub(crate) use app::is_application;
pub use app::{AppProperties, AppPropertiesBuilder};
pub use connection::{
    AuthProperties, ConnAckProperties, ConnectProperties, DisconnectProperties, WillProperties,
};
pub use message::{
    AckProperties, PublishProperties, PublishPropertiesBox, SubscribeProperties,
    UnsubscribeProperties,
};
pub use property_id::PropertyId;
pub(crate) use wire::{
    decode_boxed_properties, decode_if_v5, decode_properties, decode_properties_into,
    encoded_block_len, measure_if_v5, value, write_block,
};

use crate::read::Reader;
use crate::string::MqttStr;
use crate::{EncodeError, write};

/// A user property: a name and a value.
pub type UserProperty = (MqttStr, MqttStr);

/// The Payload Format Indicator of a PUBLISH or a will.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum PayloadFormat {
    /// Unspecified bytes (the default when the property is absent).
    #[default]
    Unspecified = 0,
    /// UTF-8 encoded character data.
    Utf8 = 1,
}

/// A per-packet property struct: how it reads a property from the wire and how it writes
/// itself.
pub(crate) trait PropertySet: Default {
    /// Whether Subscription Identifier may repeat (PUBLISH only).
    const REPEATED_SUBSCRIPTION_IDS: bool = false;

    /// Reads the value of property `id` into the struct with the reader of that property in
    /// [`value`]; `Ok(false)` if this packet does not allow `id`.
    fn read(&mut self, id: PropertyId, reader: &mut Reader) -> Result<bool, crate::DecodeError>;

    fn write_to<S: PropertySink>(&self, sink: &mut S);

    /// Called once the whole block was read, with a way to get a handle on it (for a set that
    /// keeps part of it as it is: PUBLISH's application properties).
    fn keep_block(&mut self, _block: impl FnOnce() -> Option<Bytes>) {}

    /// Checks across properties after the whole block was read.
    fn check(&self, _context: &'static str) -> Result<(), crate::DecodeError> {
        Ok(())
    }
}

/// Where a property struct writes: either a length counter or a buffer. Each method takes
/// one property of the wire type it is named after.
pub(crate) trait PropertySink {
    fn byte(&mut self, id: PropertyId, value: u8);
    fn two(&mut self, id: PropertyId, value: u16);
    fn four(&mut self, id: PropertyId, value: u32);
    fn varint(&mut self, id: PropertyId, value: u32);
    fn string(&mut self, id: PropertyId, value: &MqttStr);
    fn binary(&mut self, id: PropertyId, field: &'static str, value: &Bytes);

    fn user_properties(&mut self, pairs: &[UserProperty]) {
        for (name, value) in pairs {
            self.string(PropertyId::UserProperty, name);
            self.string_continued(value);
        }
    }

    /// The second string of a pair (no identifier before it).
    fn string_continued(&mut self, value: &MqttStr);

    /// A PUBLISH's application properties, as they are on the wire.
    fn application(&mut self, set: &AppProperties);

    fn opt_byte(&mut self, id: PropertyId, value: Option<u8>) {
        if let Some(v) = value {
            self.byte(id, v);
        }
    }

    fn opt_bool(&mut self, id: PropertyId, value: Option<bool>) {
        self.opt_byte(id, value.map(u8::from));
    }

    fn opt_two(&mut self, id: PropertyId, value: Option<u16>) {
        if let Some(v) = value {
            self.two(id, v);
        }
    }

    fn opt_four(&mut self, id: PropertyId, value: Option<u32>) {
        if let Some(v) = value {
            self.four(id, v);
        }
    }

    fn opt_string(&mut self, id: PropertyId, value: Option<&MqttStr>) {
        if let Some(v) = value {
            self.string(id, v);
        }
    }

    fn opt_binary(&mut self, id: PropertyId, field: &'static str, value: Option<&Bytes>) {
        if let Some(v) = value {
            self.binary(id, field, v);
        }
    }

    /// Authentication Method and Data (CONNECT, CONNACK, AUTH).
    fn authentication(&mut self, method: Option<&MqttStr>, data: Option<&Bytes>) {
        self.opt_string(PropertyId::AuthenticationMethod, method);
        self.opt_binary(PropertyId::AuthenticationData, "authentication data", data);
    }
}

/// Counts the encoded size of a properties block and remembers the first binary field that
/// does not fit its length prefix.
#[derive(Default)]
pub(crate) struct LenSink {
    pub(crate) len: usize,
    pub(crate) error: Option<EncodeError>,
}

impl PropertySink for LenSink {
    fn byte(&mut self, _: PropertyId, _: u8) {
        self.len += 2;
    }
    fn two(&mut self, _: PropertyId, _: u16) {
        self.len += 3;
    }
    fn four(&mut self, _: PropertyId, _: u32) {
        self.len += 5;
    }
    fn varint(&mut self, _: PropertyId, value: u32) {
        self.len += 1 + crate::varint::encoded_len(value);
    }
    fn string(&mut self, _: PropertyId, value: &MqttStr) {
        self.len += 1 + write::str_len(value);
    }
    fn string_continued(&mut self, value: &MqttStr) {
        self.len += write::str_len(value);
    }
    fn application(&mut self, set: &AppProperties) {
        self.len += set.encoded_len();
    }
    fn binary(&mut self, _: PropertyId, field: &'static str, value: &Bytes) {
        match write::binary_len(field, value) {
            Ok(len) => self.len += 1 + len,
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
    }
}

/// Writes properties into a buffer (lengths were checked by a [`LenSink`] pass).
pub(crate) struct BufSink<'a>(pub(crate) &'a mut BytesMut);

impl PropertySink for BufSink<'_> {
    fn byte(&mut self, id: PropertyId, value: u8) {
        self.0.put_u8(id as u8);
        self.0.put_u8(value);
    }
    fn two(&mut self, id: PropertyId, value: u16) {
        self.0.put_u8(id as u8);
        self.0.put_u16(value);
    }
    fn four(&mut self, id: PropertyId, value: u32) {
        self.0.put_u8(id as u8);
        self.0.put_u32(value);
    }
    fn varint(&mut self, id: PropertyId, value: u32) {
        self.0.put_u8(id as u8);
        crate::varint::put(self.0, value);
    }
    fn string(&mut self, id: PropertyId, value: &MqttStr) {
        self.0.put_u8(id as u8);
        write::put_str(self.0, value);
    }
    fn string_continued(&mut self, value: &MqttStr) {
        write::put_str(self.0, value);
    }
    fn application(&mut self, set: &AppProperties) {
        set.put(self.0);
    }
    fn binary(&mut self, id: PropertyId, _: &'static str, value: &Bytes) {
        self.0.put_u8(id as u8);
        write::put_binary(self.0, value);
    }
}
