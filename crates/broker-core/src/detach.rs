//! Detaching long-lived values from receive buffers.
//!
//! Decoded packets are slices of the `Bytes` the runtime received, which may hold many packets
//! (up to a receive buffer). That is ideal for a message on its way through, but a value kept for
//! long (a client id, a will, a subscription, a retained or queued message) would pin the whole
//! buffer. These functions copy such values into allocations of their own (a CONNECT's values
//! are copied out once, as it is handled: `codec::ConnectFrame::to_detached`).

use bytes::Bytes;
use codec::MqttStr;

/// A copy of `bytes` in its own allocation.
pub fn bytes(bytes: &Bytes) -> Bytes {
    Bytes::copy_from_slice(bytes)
}

/// A copy of `text` in its own allocation.
pub fn string(text: &MqttStr) -> MqttStr {
    text.detached()
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
