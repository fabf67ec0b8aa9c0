//! The borrowed [`CopyView`] framing reads a copy of a [`Message`] through (the message itself
//! is `broker_api`'s, shared with the features).

use std::sync::Arc;

pub use broker_api::{Expiry, Message};
#[cfg(test)]
use codec::SharedPublish;
use codec::{QoS, SubscriptionId};

/// A QoS 1 message on `topic` with a one-byte payload, for the copies' unit tests.
#[cfg(test)]
pub(crate) fn test_message(topic: &'static str) -> Arc<Message> {
    let topic = codec::MqttStr::from_static(topic).expect("valid UTF-8");
    let publish =
        SharedPublish::from_parts(topic, bytes::Bytes::from_static(b"p"), bytes::Bytes::new())
            .expect("valid topic");
    Arc::new(Message {
        publish,
        qos: QoS::AtLeastOnce,
        retain: false,
        expires_at: None,
        received_ns: 0,
        key: 0,
    })
}

/// One copy of a message as framing sees it: borrowed, so a QoS 0 copy delivered on the shard
/// that routed it needs no [`Outgoing`] of its own.
#[derive(Debug, Clone, Copy)]
pub struct CopyView<'a> {
    /// The message.
    pub message: &'a Arc<Message>,
    /// The QoS to deliver with.
    pub qos: QoS,
    /// The RETAIN flag to send.
    pub retain: bool,
    /// Subscription identifiers of the matching subscriptions.
    pub sub_ids: &'a [SubscriptionId],
}
