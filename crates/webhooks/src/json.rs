//! The JSON a webhook POSTs: `{"events": [...]}`, each event an object with its `event` name
//! (`client.connected`, ...), `at_ms` (Unix time in milliseconds when it happened) and its
//! fields.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use broker_api::BrokerEvent;
use serde_json::{Value, json};

/// An event and when it happened.
#[derive(Debug, Clone)]
pub(crate) struct Stamped {
    pub(crate) at_ms: u64,
    pub(crate) event: BrokerEvent,
}

/// The body of one POST.
pub(crate) fn batch_body(events: &[Stamped], include_payload: bool) -> Value {
    let events: Vec<Value> = (events.iter())
        .map(|stamped| event_json(stamped, include_payload))
        .collect();
    json!({ "events": events })
}

fn event_json(stamped: &Stamped, include_payload: bool) -> Value {
    let mut object = fields(&stamped.event, include_payload);
    object["event"] = json!(stamped.event.kind().name());
    object["at_ms"] = json!(stamped.at_ms);
    object
}

fn fields(event: &BrokerEvent, include_payload: bool) -> Value {
    match event {
        BrokerEvent::ClientConnected {
            client_id,
            username,
            peer,
            protocol,
            clean_start,
            keep_alive,
        } => json!({
            "clientid": client_id,
            "username": username,
            "peer": peer.map(|p| p.to_string()),
            "protocol": protocol,
            "clean_start": clean_start,
            "keep_alive": keep_alive,
        }),
        BrokerEvent::ClientDisconnected { client_id, reason } => {
            json!({ "clientid": client_id, "reason": reason })
        }
        BrokerEvent::SessionSubscribed {
            client_id,
            filter,
            qos,
        } => json!({ "clientid": client_id, "filter": filter, "qos": qos }),
        BrokerEvent::SessionUnsubscribed { client_id, filter } => {
            json!({ "clientid": client_id, "filter": filter })
        }
        BrokerEvent::MessagePublished {
            client_id,
            topic,
            qos,
            retain,
            payload,
        } => {
            let mut object = json!({
                "clientid": client_id,
                "topic": topic,
                "qos": qos,
                "retain": retain,
                "payload_bytes": payload.len(),
            });
            if include_payload {
                object["payload_base64"] = json!(BASE64.encode(payload));
            }
            object
        }
        BrokerEvent::MessageDropped { reason, count } => {
            json!({ "reason": reason, "count": count })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_names_each_event_and_its_time() {
        let published = BrokerEvent::MessagePublished {
            client_id: "c".into(),
            topic: "a/b".into(),
            qos: 1,
            retain: false,
            payload: bytes_of(b"hi"),
        };
        let events = [Stamped {
            at_ms: 7,
            event: published,
        }];
        let body = batch_body(&events, true);
        let event = &body["events"][0];
        assert_eq!(event["event"], "message.published");
        assert_eq!(event["at_ms"], 7);
        assert_eq!(event["topic"], "a/b");
        assert_eq!(event["payload_base64"], "aGk=");
        let without = batch_body(&events, false);
        assert!(without["events"][0].get("payload_base64").is_none());
        assert_eq!(without["events"][0]["payload_bytes"], 2);
    }

    fn bytes_of(b: &'static [u8]) -> broker_api::Bytes {
        broker_api::Bytes::from_static(b)
    }
}
