//! `kill -9` under load: a real broker process with persistence on takes QoS 1 and QoS 2
//! PUBLISHes from two publishers for a persistent subscriber, is killed at a random moment and
//! restarted on the same directory. Every message whose PUBACK (QoS 1) or PUBCOMP (QoS 2) a
//! publisher saw must reach the subscriber (QoS 1 at least once, QoS 2 exactly once), and the
//! subscription and a retained message must be back. `RINGMQ_CRASH_ROUNDS` sets the kills per
//! engine (2 here; `scripts/crash-test.sh` runs many more).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use codec::{Packet, ProtocolVersion, PubAck, PubComp, PubRec, PubRel, Publish, QoS};

use crate::client::{Event, RawClient, persistent_connect, publish_packet};
use crate::persistence::{ENGINES, store_config};
use crate::process::BrokerProcess;

const V5: ProtocolVersion = ProtocolVersion::V5;
const SUBSCRIBER: &str = "crash-sub";

fn rounds() -> usize {
    std::env::var("RINGMQ_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

#[test]
fn acknowledged_messages_survive_kill_9() {
    for engine in ENGINES {
        for round in 0..rounds() {
            crash_round(engine, round);
        }
    }
}

/// A broker process storing in `dir` with `engine`.
fn start_broker(engine: &str, dir: &Path) -> BrokerProcess {
    let text = format!(
        "[runtime]\nshards = 2\n[sys]\ninterval = 0\n{}",
        store_config(engine, dir)
    );
    BrokerProcess::start(&text, &dir.with_extension("toml"))
}

/// What the subscriber saw: how often each message number arrived, and the QoS 2 packet ids it
/// has answered PUBREC for but not seen PUBREL (a re-sent PUBLISH with one of them is not a new
/// message, as for any MQTT receiver).
#[derive(Default)]
struct Seen {
    counts: HashMap<(QoS, u64), u32>,
    awaiting_release: HashSet<u16>,
}

/// Acknowledges one packet as a subscriber; false when it was not a PUBLISH or PUBREL.
fn handle(client: &mut RawClient, seen: &mut Seen, packet: Packet) {
    match packet {
        Packet::Publish(publish) => receive(client, seen, &publish),
        Packet::PubRel(rel) => {
            seen.awaiting_release.remove(&rel.packet_id.get());
            client.send(&Packet::PubComp(PubComp::new(rel.packet_id)));
        }
        _ => {}
    }
}

fn receive(client: &mut RawClient, seen: &mut Seen, publish: &Publish) {
    let number: u64 = std::str::from_utf8(publish.payload())
        .ok()
        .and_then(|t| t.parse().ok())
        .expect("a numbered payload");
    let id = publish.packet_id.expect("QoS 1/2");
    match publish.qos {
        QoS::ExactlyOnce => {
            if seen.awaiting_release.insert(id.get()) {
                *seen.counts.entry((QoS::ExactlyOnce, number)).or_default() += 1;
            }
            client.send(&Packet::PubRec(PubRec::new(id)));
        }
        qos => {
            *seen.counts.entry((qos, number)).or_default() += 1;
            client.send(&Packet::PubAck(PubAck::new(id)));
        }
    }
}

/// Receives until the connection closes (the broker was killed).
fn subscribe_until_closed(mut client: RawClient, seen: Arc<Mutex<Seen>>) {
    loop {
        match client.next_event(Duration::from_secs(30)) {
            Event::Packet(packet) => handle(
                &mut client,
                &mut seen.lock().expect("not poisoned"),
                *packet,
            ),
            Event::Closed | Event::Timeout => return,
        }
    }
}

/// Publishes numbered messages (odd numbers QoS 2, even QoS 1) until the broker goes away;
/// returns those whose flow completed. The client is connected before the kill is timed, so a
/// slow start cannot leave a publisher waiting for its CONNACK when the broker dies.
fn publish_until_closed(mut client: RawClient, base: u64) -> Vec<(QoS, u64)> {
    let mut acked = Vec::new();
    for n in base.. {
        let qos = if n % 2 == 1 {
            QoS::ExactlyOnce
        } else {
            QoS::AtLeastOnce
        };
        let topic = if qos == QoS::ExactlyOnce {
            "crash/2"
        } else {
            "crash/1"
        };
        let id = client.next_packet_id();
        let publish = publish_packet(topic, n.to_string().as_bytes(), qos, Some(id));
        client.send(&Packet::Publish(publish));
        if !complete_flow(&mut client, qos) {
            return acked;
        }
        acked.push((qos, n));
    }
    acked
}

/// Waits for PUBACK, or PUBREC then (after PUBREL) PUBCOMP; false when the broker is gone.
fn complete_flow(client: &mut RawClient, qos: QoS) -> bool {
    loop {
        let packet = match client.next_event(Duration::from_secs(30)) {
            Event::Packet(packet) => *packet,
            Event::Closed | Event::Timeout => return false,
        };
        match packet {
            Packet::PubAck(_) if qos == QoS::AtLeastOnce => return true,
            Packet::PubRec(rec) => client.send(&Packet::PubRel(PubRel::new(rec.packet_id))),
            Packet::PubComp(_) => return true,
            _ => {}
        }
    }
}

fn crash_round(engine: &str, round: usize) {
    let dir = tempfile::Builder::new()
        .prefix("ringmq-crash-")
        .tempdir()
        .expect("temp dir");
    let store = dir.path().join("data");
    let broker = start_broker(engine, &store);
    let mut sub = RawClient::connected(broker.addr, persistent_connect(V5, SUBSCRIBER, 3600));
    sub.subscribe("crash/1", QoS::AtLeastOnce);
    sub.subscribe("crash/2", QoS::ExactlyOnce);
    let mut setup = RawClient::connected(broker.addr, persistent_connect(V5, "crash-setup", 0));
    let id = setup.next_packet_id();
    let mut retained = publish_packet("crash/retained", b"kept", QoS::AtLeastOnce, Some(id));
    retained.retain = true;
    setup.publish(retained);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let subscriber = {
        let seen = Arc::clone(&seen);
        std::thread::spawn(move || subscribe_until_closed(sub, seen))
    };
    let publishers: Vec<_> = (0..2u64)
        .map(|p| {
            let name = format!("crash-pub-{p}");
            let client = RawClient::connected(broker.addr, persistent_connect(V5, &name, 0));
            std::thread::spawn(move || publish_until_closed(client, p * 1_000_000))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(random_between(150, 700, round)));
    broker.kill_9();
    let acked: Vec<(QoS, u64)> = publishers
        .into_iter()
        .flat_map(|p| p.join().expect("publisher thread"))
        .collect();
    subscriber.join().expect("subscriber thread");
    assert!(
        !acked.is_empty(),
        "{engine} round {round}: nothing was acknowledged before the kill"
    );

    let broker = start_broker(engine, &store);
    let (mut sub, connack) =
        RawClient::connect(broker.addr, persistent_connect(V5, SUBSCRIBER, 3600));
    assert!(
        connack.session_present,
        "{engine} round {round}: the session is back"
    );
    let mut seen = Arc::try_unwrap(seen)
        .ok()
        .expect("one owner")
        .into_inner()
        .expect("not poisoned");
    let missing = |seen: &Seen| {
        acked
            .iter()
            .filter(|m| !seen.counts.contains_key(m))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while missing(&seen) > 0 && Instant::now() < deadline {
        if let Event::Packet(packet) = sub.next_event(Duration::from_millis(200)) {
            handle(&mut sub, &mut seen, *packet);
        }
    }
    assert_eq!(
        missing(&seen),
        0,
        "{engine} round {round}: acknowledged messages lost (of {})",
        acked.len()
    );
    let duplicates: Vec<_> = (seen.counts.iter())
        .filter(|((qos, _), count)| *qos == QoS::ExactlyOnce && **count > 1)
        .collect();
    assert!(
        duplicates.is_empty(),
        "{engine} round {round}: QoS 2 delivered twice: {duplicates:?}"
    );

    let mut publisher = RawClient::connected(broker.addr, persistent_connect(V5, "crash-after", 0));
    publisher.publish_simple("crash/1", b"424242", QoS::AtLeastOnce);
    sub.recv_where("the message published after the restart", |p| match p {
        Packet::Publish(p) if p.payload() == b"424242" => Some(()),
        _ => None,
    });
    let mut fresh = RawClient::connected(broker.addr, persistent_connect(V5, "crash-fresh", 0));
    fresh.subscribe("crash/retained", QoS::AtLeastOnce);
    let kept = fresh.expect_publish_on("crash/retained");
    assert_eq!(
        kept.payload(),
        b"kept",
        "{engine} round {round}: retained message"
    );
    eprintln!(
        "crash {engine} round {round}: {} acknowledged before the kill, all delivered after the restart",
        acked.len()
    );
}

/// A number in `[low, high)` that differs per round and per run.
fn random_between(low: u64, high: u64, round: usize) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    low + (nanos
        .wrapping_mul(2654435761)
        .wrapping_add(round as u64 * 7919))
        % (high - low)
}

/// A SUBACK is sent only once the subscription is on disk: a broker killed right after it was
/// received still has the session and the subscription after the restart.
#[test]
fn a_subscription_acknowledged_before_a_kill_is_kept() {
    for engine in ENGINES {
        let dir = tempfile::Builder::new()
            .prefix("ringmq-crash-sub-")
            .tempdir()
            .expect("temp dir");
        let store = dir.path().join("data");
        let broker = start_broker(engine, &store);
        let mut sub = RawClient::connected(broker.addr, persistent_connect(V5, "kept-sub", 3600));
        sub.subscribe("kept/#", QoS::AtLeastOnce);
        broker.kill_9();
        let broker = start_broker(engine, &store);
        let (mut sub, connack) =
            RawClient::connect(broker.addr, persistent_connect(V5, "kept-sub", 3600));
        assert!(
            connack.session_present,
            "{engine}: the session was stored before its SUBACK"
        );
        let mut publisher =
            RawClient::connected(broker.addr, persistent_connect(V5, "kept-pub", 0));
        publisher.publish_simple("kept/a", b"1", QoS::AtLeastOnce);
        let publish = sub.expect_publish_on("kept/a");
        assert_eq!(
            publish.payload(),
            b"1",
            "{engine}: the subscription was stored"
        );
    }
}

/// A session connected when the broker was killed lost its connection without DISCONNECT: its
/// stored will (with its delay, counted from the restart) is published after the restart, to a
/// subscription that was itself stored.
#[test]
fn the_will_of_a_session_connected_at_the_kill_is_published_after_the_restart() {
    for engine in ENGINES {
        let dir = tempfile::Builder::new()
            .prefix("ringmq-crash-will-")
            .tempdir()
            .expect("temp dir");
        let store = dir.path().join("data");
        let broker = start_broker(engine, &store);
        let mut watcher =
            RawClient::connected(broker.addr, persistent_connect(V5, "will-watcher", 3600));
        watcher.subscribe("wills/#", QoS::AtLeastOnce);
        watcher.disconnect();
        let mut connect = persistent_connect(V5, "will-owner", 3600);
        let properties = codec::WillProperties {
            will_delay_interval: Some(1),
            ..codec::WillProperties::default()
        };
        connect.will = Some(codec::Will {
            topic: crate::client::s("wills/owner"),
            payload: bytes::Bytes::from_static(b"gone"),
            qos: QoS::AtLeastOnce,
            retain: false,
            properties,
        });
        let mut owner = RawClient::connected(broker.addr, connect);
        // A CONNACK does not wait for the disk; a SUBACK does, and its batch comes after the
        // one holding the session: once it arrives, the session and its will are stored.
        owner.subscribe("owner/own", QoS::AtLeastOnce);
        broker.kill_9();
        drop(owner);
        let broker = start_broker(engine, &store);
        let mut watcher =
            RawClient::connected(broker.addr, persistent_connect(V5, "will-watcher", 3600));
        let will = watcher.expect_publish_on("wills/owner");
        assert_eq!(will.payload(), b"gone", "{engine}: the stored will");
    }
}
