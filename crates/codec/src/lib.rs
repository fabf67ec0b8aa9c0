//! MQTT 3.1, 3.1.1 and 5.0 packets over `bytes`: decoding, encoding and the protocol newtypes.
//!
//! No I/O, no clock, no logging: the codec is a pure function of its input.
#![forbid(unsafe_code)]

mod types;

pub use types::{
    PacketId, ProtocolVersion, QoS, RetainHandling, SubscriptionId, SubscriptionOptions,
};
