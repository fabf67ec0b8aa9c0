//! How a retained message is kept in the cluster's key-value bucket (docs/cluster.md,
//! "Retained messages").
//!
//! - The key is the topic in unpadded base64url (`A-Z a-z 0-9 - _`, all valid in a NATS key;
//!   reversible for every topic).
//! - The value, version 1: `[1][qos][expires: u64 BE unix seconds, 0 = never]`
//!   `[origin length: u16 BE][origin][properties length: u32 BE][properties][payload]`.
//!   An empty payload records that the topic's retained message was cleared (the record keeps
//!   its origin, which a key-value delete could not).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use codec::{MqttStr, QoS};

use super::{ClusterPublish, Scope};

/// The value layout written by this version.
const VERSION: u8 = 1;

/// Why a bucket entry is not a retained record of this version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The key is not base64url of an MQTT topic.
    #[error("key is not an encoded topic")]
    Key,
    /// The value is cut short or of another version.
    #[error("value malformed or of an unknown version")]
    Value,
}

/// One retained record, as written by a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetainedRecord {
    /// `<node_id>/<start nonce>` of the node that wrote it.
    pub origin: String,
    /// The QoS it was published with.
    pub qos: QoS,
    /// When it expires, in seconds since the Unix epoch.
    pub expires_unix: Option<u64>,
    /// The MQTT 5.0 properties every subscriber gets, encoded as in a PUBLISH.
    pub properties: Bytes,
    /// The payload; empty: the retained message was cleared.
    pub payload: Bytes,
}

/// The bucket key of `topic`.
pub fn key_of(topic: &str) -> String {
    URL_SAFE_NO_PAD.encode(topic)
}

/// The topic a bucket key names.
pub fn topic_of(key: &str) -> Result<MqttStr, RecordError> {
    let bytes = URL_SAFE_NO_PAD.decode(key).map_err(|_| RecordError::Key)?;
    let text = String::from_utf8(bytes).map_err(|_| RecordError::Key)?;
    MqttStr::try_from(text).map_err(|_| RecordError::Key)
}

impl RetainedRecord {
    /// The value stored in the bucket.
    pub fn encode(&self) -> Bytes {
        let origin = self.origin.as_bytes();
        let mut out =
            BytesMut::with_capacity(16 + origin.len() + self.properties.len() + self.payload.len());
        out.put_u8(VERSION);
        out.put_u8(self.qos as u8);
        out.put_u64(self.expires_unix.unwrap_or(0));
        out.put_u16(u16::try_from(origin.len()).unwrap_or(u16::MAX));
        out.put_slice(&origin[..origin.len().min(usize::from(u16::MAX))]);
        out.put_u32(u32::try_from(self.properties.len()).unwrap_or(u32::MAX));
        out.put_slice(&self.properties);
        out.put_slice(&self.payload);
        out.freeze()
    }

    /// A value read from the bucket.
    pub fn decode(mut value: Bytes) -> Result<Self, RecordError> {
        if value.remaining() < 12 || value.get_u8() != VERSION {
            return Err(RecordError::Value);
        }
        let qos = match value.get_u8() {
            0 => QoS::AtMostOnce,
            1 => QoS::AtLeastOnce,
            2 => QoS::ExactlyOnce,
            _ => return Err(RecordError::Value),
        };
        let expires_unix = Some(value.get_u64()).filter(|&at| at != 0);
        let origin_len = usize::from(value.get_u16());
        let origin = take(&mut value, origin_len)?;
        let origin = String::from_utf8(origin.to_vec()).map_err(|_| RecordError::Value)?;
        if value.remaining() < 4 {
            return Err(RecordError::Value);
        }
        let properties_len = value.get_u32() as usize;
        let properties = take(&mut value, properties_len)?;
        Ok(Self {
            origin,
            qos,
            expires_unix,
            properties,
            payload: value,
        })
    }

    /// The message for a shard to store as `topic`'s retained message, at `now_unix`: an
    /// expired record is a clear (empty payload).
    pub fn into_publish(self, topic: MqttStr, now_unix: u64) -> ClusterPublish {
        let remaining = self.expires_unix.map(|at| at.saturating_sub(now_unix));
        let expired = remaining == Some(0);
        ClusterPublish {
            topic,
            payload: if expired { Bytes::new() } else { self.payload },
            properties: self.properties,
            qos: self.qos,
            retain: true,
            expiry: remaining.map(|secs| u32::try_from(secs).unwrap_or(u32::MAX)),
            scope: Scope::Retained,
            key: 0,
        }
    }
}

/// The next `len` bytes of `value`.
fn take(value: &mut Bytes, len: usize) -> Result<Bytes, RecordError> {
    if value.remaining() < len {
        return Err(RecordError::Value);
    }
    Ok(value.split_to(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(payload: &'static [u8]) -> RetainedRecord {
        RetainedRecord {
            origin: "n1/00ff".into(),
            qos: QoS::AtLeastOnce,
            expires_unix: Some(1_000),
            properties: Bytes::from_static(b"\x03\x00\x04text"),
            payload: Bytes::from_static(payload),
        }
    }

    #[test]
    fn a_record_round_trips() {
        for payload in [&b"21.5"[..], b""] {
            let original = record(payload);
            assert_eq!(RetainedRecord::decode(original.encode()).unwrap(), original);
        }
        let no_expiry = RetainedRecord {
            expires_unix: None,
            ..record(b"x")
        };
        assert_eq!(
            RetainedRecord::decode(no_expiry.encode()).unwrap(),
            no_expiry
        );
    }

    #[test]
    fn cut_or_foreign_values_are_refused() {
        let encoded = record(b"x").encode();
        // Everything before the payload: a cut anywhere in it is refused, never a panic.
        let before_payload = encoded.len() - 1;
        for len in 0..before_payload {
            let cut = encoded.slice(..len);
            assert!(RetainedRecord::decode(cut).is_err(), "cut at {len}");
        }
        assert!(RetainedRecord::decode(Bytes::from_static(b"\x02\x00")).is_err());
        let mut bad_qos = encoded.to_vec();
        bad_qos[1] = 3;
        assert!(RetainedRecord::decode(Bytes::from(bad_qos)).is_err());
    }

    #[test]
    fn keys_are_valid_nats_keys_and_reversible() {
        for topic in [
            "a/b",
            "/",
            "sensors/+x/ü/ä.b",
            "with space/%",
            "$SYS-like/x",
        ] {
            let key = key_of(topic);
            let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
            assert!(key.chars().all(valid), "{key}");
            assert_eq!(topic_of(&key).unwrap().as_str(), topic);
        }
        assert_eq!(topic_of("***"), Err(RecordError::Key));
    }

    #[test]
    fn expiry_counts_from_now_and_an_expired_record_clears() {
        let live = record(b"v").into_publish(MqttStr::try_from("t").unwrap(), 400);
        assert_eq!(live.expiry, Some(600));
        assert_eq!(&live.payload[..], b"v");
        assert!(live.retain);
        let expired = record(b"v").into_publish(MqttStr::try_from("t").unwrap(), 1_000);
        assert!(expired.payload.is_empty());
    }
}
