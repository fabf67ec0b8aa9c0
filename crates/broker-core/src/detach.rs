//! Detaching long-lived values from receive buffers.
//!
//! Decoded packets are slices of the `Bytes` the runtime received, which may hold many packets
//! (up to a receive buffer). That is ideal for a message on its way through, but a value kept for
//! long (a client id, a will, a subscription, a retained or queued message) would pin the whole
//! buffer. These functions copy such values into allocations of their own.

use bytes::Bytes;
use codec::{MqttStr, UserProperty, Will};

/// A copy of `bytes` in its own allocation.
pub fn bytes(bytes: &Bytes) -> Bytes {
    Bytes::copy_from_slice(bytes)
}

/// A copy of `text` in its own allocation.
pub fn string(text: &MqttStr) -> MqttStr {
    text.detached()
}

fn optional(text: &mut Option<MqttStr>) {
    if let Some(t) = text.as_mut() {
        *t = string(t);
    }
}

fn user_properties(properties: &mut [UserProperty]) {
    for (key, value) in properties {
        *key = string(key);
        *value = string(value);
    }
}

/// Detaches every field of a will (it lives as long as its session's connection, or longer).
pub fn will(will: &mut Will) {
    will.topic = string(&will.topic);
    will.payload = bytes(&will.payload);
    let p = &mut will.properties;
    optional(&mut p.content_type);
    optional(&mut p.response_topic);
    if let Some(data) = p.correlation_data.as_mut() {
        *data = bytes(data);
    }
    user_properties(&mut p.user_properties);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detached_values_do_not_share_the_buffer() {
        let buffer = Bytes::from_static(b"client-id and more bytes of the same receive buffer");
        let id = MqttStr::from_bytes(buffer.slice(0..9)).unwrap();
        let copy = string(&id);
        assert_eq!(copy.as_str(), "client-id");
        assert_ne!(copy.as_bytes().as_ptr(), id.as_bytes().as_ptr());
    }
}
