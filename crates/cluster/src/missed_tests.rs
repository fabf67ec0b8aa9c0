use bytes::Bytes;
use codec::{MqttStr, ProtocolVersion, QoS, RetainHandling, SubscriptionId};
use session_store::SessionExpiry;
use session_store::storage::{StoredSession, StoredSubscription};

use super::*;

fn subscription(filter: &str, qos: QoS, no_local: bool, id: u32) -> StoredSubscription {
    StoredSubscription {
        filter: MqttStr::try_from(filter).unwrap(),
        options: SubscriptionOptions {
            qos,
            no_local,
            retain_as_published: false,
            retain_handling: RetainHandling::SendAtSubscribe,
        },
        id: SubscriptionId::new(id),
    }
}

fn session(subscriptions: Vec<StoredSubscription>) -> StoredSession {
    let client_id = MqttStr::try_from("c").unwrap();
    let mut session =
        StoredSession::new(client_id, ProtocolVersion::V5, SessionExpiry::OnClose, None);
    session.subscriptions = subscriptions;
    session
}

fn kept(topic: &str, qos: QoS, origin: &str, expiry: Option<u32>) -> Kept {
    Kept {
        publish: ClusterPublish {
            topic: MqttStr::try_from(topic).unwrap(),
            payload: Bytes::from_static(b"p"),
            properties: Bytes::new(),
            qos,
            retain: true,
            expiry,
            scope: Scope::Plain,
            key: 0,
        },
        origin: origin.to_owned(),
        kept_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1000),
    }
}

#[test]
fn the_read_starts_before_the_last_heartbeat_or_at_the_last_mirrored_copy_whichever_is_earlier() {
    let at = |secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
    let mirrored = |offline_since| Mirrored {
        session: session(Vec::new()),
        written_at: at(50),
        offline_since,
    };
    assert_eq!(read_start(Some(at(100)), &mirrored(None)), at(100) - MARGIN);
    assert_eq!(read_start(None, &mirrored(None)), at(50) - MARGIN);
    assert_eq!(read_start(Some(at(100)), &mirrored(Some(at(70)))), at(70));
    assert_eq!(read_start(None, &mirrored(Some(at(70)))), at(70));
    // A heartbeat carrying an unfinished catch-up's start: the offline session reads from it.
    assert_eq!(
        read_start(Some(at(60)), &mirrored(Some(at(70)))),
        at(60) - MARGIN
    );
}

#[test]
fn shared_and_qos_0_subscriptions_get_nothing() {
    let session = session(vec![
        subscription("$share/g/a/#", QoS::AtLeastOnce, false, 1),
        subscription("b/#", QoS::AtMostOnce, false, 2),
        subscription("c/+", QoS::ExactlyOnce, false, 3),
    ]);
    let plain = plain_subscriptions(&session);
    assert_eq!(plain.len(), 1);
    assert_eq!(plain[0].filter.as_str(), "c/+");
    assert_eq!(subjects_of("ringmq", &plain), vec!["ringmq.rel.c.*"]);
}

#[test]
fn many_subjects_are_read_through_the_whole_root() {
    let filters: Vec<StoredSubscription> = (0..9)
        .map(|n| subscription(&format!("t{n}"), QoS::AtLeastOnce, false, 1))
        .collect();
    let plain = plain_subscriptions(&session(filters));
    assert_eq!(subjects_of("ringmq", &plain), vec!["ringmq.rel.>"]);
    let two = plain_subscriptions(&session(vec![subscription(
        "a/#",
        QoS::AtLeastOnce,
        false,
        1,
    )]));
    assert_eq!(
        subjects_of("ringmq", &two),
        vec!["ringmq.rel.a", "ringmq.rel.a.>"]
    );
}

#[test]
fn one_copy_at_the_lower_qos_with_every_matching_identifier() {
    let plain = plain_subscriptions(&session(vec![
        subscription("a/#", QoS::AtLeastOnce, false, 1),
        subscription("a/+", QoS::ExactlyOnce, false, 2),
        subscription("z", QoS::ExactlyOnce, false, 3),
    ]));
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1001);
    let copy = copy_for(
        &plain,
        &kept("a/b", QoS::ExactlyOnce, "n1/1", None),
        "n0/1",
        now,
    )
    .unwrap();
    assert_eq!(copy.qos, QoS::ExactlyOnce);
    assert_eq!(copy.sub_ids.len(), 2);
    assert!(!copy.retain, "RETAIN only with retain as published");
    let copy = copy_for(
        &plain,
        &kept("a/b/c", QoS::ExactlyOnce, "n1/1", None),
        "n0/1",
        now,
    )
    .unwrap();
    assert_eq!(copy.qos, QoS::AtLeastOnce);
    assert!(
        copy_for(
            &plain,
            &kept("b", QoS::AtLeastOnce, "n1/1", None),
            "n0/1",
            now
        )
        .is_none()
    );
}

#[test]
fn no_local_skips_the_dead_node_and_expired_messages_are_dropped() {
    let plain = plain_subscriptions(&session(vec![subscription("a", QoS::AtLeastOnce, true, 1)]));
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1005);
    assert!(
        copy_for(
            &plain,
            &kept("a", QoS::AtLeastOnce, "n0/1", None),
            "n0/1",
            now
        )
        .is_none()
    );
    assert!(
        copy_for(
            &plain,
            &kept("a", QoS::AtLeastOnce, "n1/1", None),
            "n0/1",
            now
        )
        .is_some()
    );
    let expired = kept("a", QoS::AtLeastOnce, "n1/1", Some(5));
    assert!(copy_for(&plain, &expired, "n0/1", now).is_none());
    let alive = kept("a", QoS::AtLeastOnce, "n1/1", Some(60));
    let copy = copy_for(&plain, &alive, "n0/1", now).unwrap();
    assert_eq!(
        copy.expires_at,
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1060))
    );
}
