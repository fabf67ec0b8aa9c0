//! End-to-end flows with a real client library: rumqttc's 3.1.1 (`v4`) and 5.0 (`v5`) clients,
//! also talking to each other across protocol versions.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rumqttc::v5::mqttbytes::QoS as QoS5;
use rumqttc::v5::mqttbytes::v5::{Packet as Packet5, PublishProperties};
use rumqttc::{Event, Packet as Packet4, QoS as QoS4};

use crate::harness::TestBroker;

const WAIT: Duration = Duration::from_secs(5);

/// A rumqttc 3.1.1 client and its event loop, connected (CONNACK seen).
fn v4_client(
    broker: &TestBroker,
    id: &str,
    will: Option<rumqttc::LastWill>,
) -> (rumqttc::Client, rumqttc::Connection) {
    let addr = broker.addr();
    let mut options = rumqttc::MqttOptions::new(id, addr.ip().to_string(), addr.port());
    options.set_keep_alive(Duration::from_secs(30));
    if let Some(will) = will {
        options.set_last_will(will);
    }
    let (client, mut connection) = rumqttc::Client::new(options, 64);
    v4_wait(&mut connection, "CONNACK", |p| {
        matches!(p, Packet4::ConnAck(_)).then_some(())
    });
    (client, connection)
}

/// Drives a 3.1.1 connection until an incoming packet `pick` accepts.
fn v4_wait<T>(
    connection: &mut rumqttc::Connection,
    what: &str,
    mut pick: impl FnMut(&Packet4) -> Option<T>,
) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match connection.recv_timeout(left) {
            Ok(Ok(Event::Incoming(packet))) => {
                if let Some(found) = pick(&packet) {
                    return found;
                }
            }
            Ok(Ok(Event::Outgoing(_))) => {}
            Ok(Err(e)) => panic!("waiting for {what}: connection error {e}"),
            Err(_) => panic!("timed out waiting for {what}"),
        }
    }
}

/// A rumqttc 5.0 client and its event loop, connected (CONNACK seen).
fn v5_client(broker: &TestBroker, id: &str) -> (rumqttc::v5::Client, rumqttc::v5::Connection) {
    let addr = broker.addr();
    let mut options = rumqttc::v5::MqttOptions::new(id, addr.ip().to_string(), addr.port());
    options.set_keep_alive(Duration::from_secs(30));
    let (client, mut connection) = rumqttc::v5::Client::new(options, 64);
    v5_wait(&mut connection, "CONNACK", |p| {
        matches!(p, Packet5::ConnAck(_)).then_some(())
    });
    (client, connection)
}

/// Drives a 5.0 connection until an incoming packet `pick` accepts.
fn v5_wait<T>(
    connection: &mut rumqttc::v5::Connection,
    what: &str,
    mut pick: impl FnMut(&Packet5) -> Option<T>,
) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match connection.recv_timeout(left) {
            Ok(Ok(rumqttc::v5::Event::Incoming(packet))) => {
                if let Some(found) = pick(&packet) {
                    return found;
                }
            }
            Ok(Ok(rumqttc::v5::Event::Outgoing(_))) => {}
            Ok(Err(e)) => panic!("waiting for {what}: connection error {e}"),
            Err(_) => panic!("timed out waiting for {what}"),
        }
    }
}

fn v4_publish(connection: &mut rumqttc::Connection) -> rumqttc::Publish {
    v4_wait(connection, "PUBLISH", |p| match p {
        Packet4::Publish(publish) => Some(publish.clone()),
        _ => None,
    })
}

fn v5_publish(connection: &mut rumqttc::v5::Connection) -> rumqttc::v5::mqttbytes::v5::Publish {
    v5_wait(connection, "PUBLISH", |p| match p {
        Packet5::Publish(publish) => Some(publish.clone()),
        _ => None,
    })
}

#[test]
fn rumqttc_v311_pub_sub_at_every_qos_and_retained() {
    let broker = TestBroker::start();
    let (sub, mut sub_conn) = v4_client(&broker, "rq-sub", None);
    sub.subscribe("rq/#", QoS4::ExactlyOnce).expect("queued");
    v4_wait(&mut sub_conn, "SUBACK", |p| {
        matches!(p, Packet4::SubAck(_)).then_some(())
    });
    let (publisher, mut pub_conn) = v4_client(&broker, "rq-pub", None);
    for qos in [QoS4::AtMostOnce, QoS4::AtLeastOnce, QoS4::ExactlyOnce] {
        publisher
            .publish(format!("rq/{}", qos as u8), qos, false, vec![qos as u8; 3])
            .expect("queued");
    }
    publisher
        .publish("rq/kept", QoS4::AtLeastOnce, true, "retained")
        .expect("queued");
    // The publisher's loop must run to send; the subscriber's to receive.
    let mut got = Vec::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < 4 {
        assert!(Instant::now() < deadline, "got only {got:?}");
        let _ = pub_conn.recv_timeout(Duration::from_millis(10));
        if let Ok(Ok(Event::Incoming(Packet4::Publish(p)))) =
            sub_conn.recv_timeout(Duration::from_millis(10))
        {
            got.push((p.topic.clone(), p.qos, p.payload.clone()));
        }
    }
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got[0],
        (
            "rq/0".to_owned(),
            QoS4::AtMostOnce,
            Bytes::from(vec![0u8; 3])
        )
    );
    assert_eq!(
        got[1],
        (
            "rq/1".to_owned(),
            QoS4::AtLeastOnce,
            Bytes::from(vec![1u8; 3])
        )
    );
    assert_eq!(
        got[2],
        (
            "rq/2".to_owned(),
            QoS4::ExactlyOnce,
            Bytes::from(vec![2u8; 3])
        )
    );
    assert_eq!(got[3].0, "rq/kept");

    let (late, mut late_conn) = v4_client(&broker, "rq-late", None);
    late.subscribe("rq/kept", QoS4::AtLeastOnce)
        .expect("queued");
    let retained = v4_publish(&mut late_conn);
    assert!(retained.retain);
    assert_eq!(&retained.payload[..], b"retained");
}

#[test]
fn rumqttc_v311_will_on_abrupt_close() {
    let broker = TestBroker::start();
    let (watcher, mut watch_conn) = v4_client(&broker, "rq-watch", None);
    watcher
        .subscribe("rq/will", QoS4::AtLeastOnce)
        .expect("queued");
    v4_wait(&mut watch_conn, "SUBACK", |p| {
        matches!(p, Packet4::SubAck(_)).then_some(())
    });
    let will = rumqttc::LastWill::new("rq/will", "bye", QoS4::AtLeastOnce, false);
    let (client, connection) = v4_client(&broker, "rq-dying", Some(will));
    drop(connection);
    drop(client);
    let got = v4_publish(&mut watch_conn);
    assert_eq!(got.topic, "rq/will");
    assert_eq!(&got.payload[..], b"bye");
}

#[test]
fn rumqttc_v5_properties_are_forwarded_to_v5_and_stripped_for_v311() {
    let broker = TestBroker::start();
    let (sub5, mut sub5_conn) = v5_client(&broker, "rq5-sub");
    sub5.subscribe("rq5/props", QoS5::AtLeastOnce)
        .expect("queued");
    v5_wait(&mut sub5_conn, "SUBACK", |p| {
        matches!(p, Packet5::SubAck(_)).then_some(())
    });
    let (sub4, mut sub4_conn) = v4_client(&broker, "rq4-sub", None);
    sub4.subscribe("rq5/props", QoS4::AtLeastOnce)
        .expect("queued");
    v4_wait(&mut sub4_conn, "SUBACK", |p| {
        matches!(p, Packet4::SubAck(_)).then_some(())
    });

    let (publisher, mut pub_conn) = v5_client(&broker, "rq5-pub");
    let properties = PublishProperties {
        payload_format_indicator: Some(1),
        content_type: Some("application/json".into()),
        response_topic: Some("rq5/reply".into()),
        correlation_data: Some(Bytes::from_static(b"req-1")),
        user_properties: vec![("a".into(), "1".into()), ("b".into(), "2".into())],
        ..PublishProperties::default()
    };
    publisher
        .publish_with_properties("rq5/props", QoS5::AtLeastOnce, false, "{}", properties)
        .expect("queued");
    v5_wait(&mut pub_conn, "PUBACK", |p| {
        matches!(p, Packet5::PubAck(_)).then_some(())
    });

    let got = v5_publish(&mut sub5_conn);
    let props = got.properties.expect("properties forwarded");
    assert_eq!(props.payload_format_indicator, Some(1));
    assert_eq!(props.content_type.as_deref(), Some("application/json"));
    assert_eq!(props.response_topic.as_deref(), Some("rq5/reply"));
    assert_eq!(props.correlation_data.as_deref(), Some(&b"req-1"[..]));
    assert_eq!(
        props.user_properties,
        vec![
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned())
        ]
    );
    let got4 = v4_publish(&mut sub4_conn);
    assert_eq!(&got4.payload[..], b"{}");
}

#[test]
fn rumqttc_v311_publisher_reaches_v5_subscriber() {
    let broker = TestBroker::start();
    let (sub5, mut sub5_conn) = v5_client(&broker, "mix-sub");
    sub5.subscribe("mix/+", QoS5::ExactlyOnce).expect("queued");
    v5_wait(&mut sub5_conn, "SUBACK", |p| {
        matches!(p, Packet5::SubAck(_)).then_some(())
    });
    let (publisher, mut pub_conn) = v4_client(&broker, "mix-pub", None);
    publisher
        .publish("mix/x", QoS4::ExactlyOnce, false, "across")
        .expect("queued");
    v4_wait(&mut pub_conn, "PUBCOMP", |p| {
        matches!(p, Packet4::PubComp(_)).then_some(())
    });
    let got = v5_publish(&mut sub5_conn);
    assert_eq!(&got.topic[..], b"mix/x");
    assert_eq!(got.qos, QoS5::ExactlyOnce);
    assert_eq!(&got.payload[..], b"across");
}
