//! What travels in NATS headers beside the subject (the topic) and the payload.
//!
//! | header            | value                                                           |
//! |-------------------|-----------------------------------------------------------------|
//! | `Mqtt-Qos`        | `0`, `1` or `2`: the QoS it was published with                  |
//! | `Mqtt-Retain`     | `1` when the RETAIN flag was set (absent otherwise)             |
//! | `Mqtt-Expiry`     | the Message Expiry Interval left, in seconds (absent: none)     |
//! | `Mqtt-Properties` | base64 of the MQTT 5.0 properties every subscriber gets (payload format, response topic, correlation data, user properties, content type), encoded as in a PUBLISH (absent: none) |
//! | `Ringmq-Origin`   | `<node_id>/<start nonce>`: the sending node in this run         |
//! | `Ringmq-Seq`      | the sending node's message number (duplicate suppression)       |
//! | `Ringmq-Key`      | the message's key, drawn by the shard that received it (the delivery journal's name for it; absent: none) |
//! | `Ringmq-Shares-Served` | `1`: published while its node's NATS link was down, its shares served there |

use std::time::Instant;

use async_nats::HeaderMap;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use codec::{MqttStr, QoS};

use super::{ClusterPublish, Scope};
use broker_api::{Expiry, Message};

const QOS: &str = "Mqtt-Qos";
const RETAIN: &str = "Mqtt-Retain";
const EXPIRY: &str = "Mqtt-Expiry";
const PROPERTIES: &str = "Mqtt-Properties";
const ORIGIN: &str = "Ringmq-Origin";
const SEQ: &str = "Ringmq-Seq";
const KEY: &str = "Ringmq-Key";
const SHARES_SERVED: &str = "Ringmq-Shares-Served";

/// Why a NATS message is not a RingMQ message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// A header is missing or malformed.
    #[error("header {0} missing or malformed")]
    Bad(&'static str),
    /// The message had expired before it left its node.
    #[error("expired")]
    Expired,
}

/// Where a message came from: its node's run and its number there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `<node_id>/<start nonce>`.
    pub node: String,
    /// The message's number on that node (increasing).
    pub seq: u64,
}

/// The headers of `message`, sent by `origin` as its `seq`-th message.
pub fn encode(
    message: &Message,
    origin: &str,
    seq: u64,
    now: Instant,
) -> Result<HeaderMap, HeaderError> {
    let mut headers = HeaderMap::new();
    headers.insert(QOS, (message.qos as u8).to_string());
    if message.retain {
        headers.insert(RETAIN, "1");
    }
    match message.expiry(now) {
        Expiry::Never => {}
        Expiry::Remaining(secs) => headers.insert(EXPIRY, secs.to_string()),
        Expiry::Expired => return Err(HeaderError::Expired),
    }
    let properties = message.publish.shared_properties();
    if !properties.is_empty() {
        headers.insert(PROPERTIES, STANDARD.encode(properties));
    }
    headers.insert(ORIGIN, origin);
    headers.insert(SEQ, seq.to_string());
    if message.key != 0 {
        headers.insert(KEY, message.key.to_string());
    }
    Ok(headers)
}

/// Marks a message whose node served its shared subscriptions itself (published while NATS
/// was down): queue groups do not serve it again.
pub fn mark_shares_served(headers: &mut HeaderMap) {
    headers.insert(SHARES_SERVED, "1");
}

/// Whether `headers` carry [`mark_shares_served`]'s mark.
pub fn shares_served(headers: &HeaderMap) -> bool {
    headers.get(SHARES_SERVED).is_some()
}

/// The origin named by `headers`.
pub fn origin(headers: &HeaderMap) -> Result<Origin, HeaderError> {
    let node = text(headers, ORIGIN)?.to_owned();
    let seq = text(headers, SEQ)?
        .parse()
        .map_err(|_| HeaderError::Bad(SEQ))?;
    Ok(Origin { node, seq })
}

/// The message a NATS message carries (its topic already decoded from the subject).
pub fn decode(
    topic: MqttStr,
    payload: Bytes,
    headers: &HeaderMap,
    scope: Scope,
) -> Result<ClusterPublish, HeaderError> {
    let qos = match text(headers, QOS)? {
        "0" => QoS::AtMostOnce,
        "1" => QoS::AtLeastOnce,
        "2" => QoS::ExactlyOnce,
        _ => return Err(HeaderError::Bad(QOS)),
    };
    let retain = headers.get(RETAIN).is_some_and(|v| v.as_str() == "1");
    let expiry = match headers.get(EXPIRY) {
        None => None,
        Some(value) => Some(
            value
                .as_str()
                .parse()
                .map_err(|_| HeaderError::Bad(EXPIRY))?,
        ),
    };
    let properties = match headers.get(PROPERTIES) {
        None => Bytes::new(),
        Some(value) => Bytes::from(
            STANDARD
                .decode(value.as_str())
                .map_err(|_| HeaderError::Bad(PROPERTIES))?,
        ),
    };
    let key = match headers.get(KEY) {
        None => 0,
        Some(value) => value.as_str().parse().map_err(|_| HeaderError::Bad(KEY))?,
    };
    Ok(ClusterPublish {
        topic,
        payload,
        properties,
        qos,
        retain,
        expiry,
        scope,
        key,
    })
}

fn text<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<&'a str, HeaderError> {
    headers
        .get(name)
        .map(|value| value.as_str())
        .ok_or(HeaderError::Bad(name))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use codec::{PublishProperties, SharedPublish};

    use super::*;

    #[test]
    fn qos_retain_expiry_and_properties_round_trip() {
        let properties = PublishProperties {
            application: codec::AppProperties::builder()
                .content_type(Some(MqttStr::try_from("text/plain").unwrap()))
                .correlation_data(Some(Bytes::from_static(b"\x00\x01")))
                .build()
                .unwrap(),
            ..PublishProperties::default()
        };
        let topic = MqttStr::try_from("a/b").unwrap();
        let publish =
            SharedPublish::new(topic.clone(), Bytes::from_static(b"hi"), &properties).unwrap();
        let now = Instant::now();
        let message = Arc::new(Message {
            publish,
            qos: QoS::ExactlyOnce,
            retain: true,
            expires_at: Some(now + std::time::Duration::from_secs(30)),
            received_ns: 0,
            key: 41,
        });
        let headers = encode(&message, "n1/abc", 7, now).unwrap();
        assert_eq!(
            origin(&headers).unwrap(),
            Origin {
                node: "n1/abc".into(),
                seq: 7
            }
        );
        let back = decode(topic, Bytes::from_static(b"hi"), &headers, Scope::Plain).unwrap();
        assert_eq!(back.qos, QoS::ExactlyOnce);
        assert!(back.retain);
        assert_eq!(back.expiry, Some(30));
        assert_eq!(&back.properties, message.publish.shared_properties());
        assert_eq!(back.key, 41);
    }

    #[test]
    fn a_message_without_qos_is_refused() {
        let headers = HeaderMap::new();
        let topic = MqttStr::try_from("a").unwrap();
        assert_eq!(
            decode(topic, Bytes::new(), &headers, Scope::Plain).unwrap_err(),
            HeaderError::Bad(QOS)
        );
    }
}
