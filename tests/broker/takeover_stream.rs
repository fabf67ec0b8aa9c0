//! A publisher streams numbered QoS 1 messages while the subscriber's session is taken over
//! again and again: every message arrives at least once, a repeated one carries DUP, and on
//! every connection the one publisher's messages arrive in publish order (MQTT 5.0 4.6.0-6),
//! resends first. Copies the old shard forwards never arrive after newer copies routed straight
//! to the new shard (shard/fence.rs).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use codec::{Packet, Publish, QoS};

use crate::client::{Event, RawClient, V5, V311, persistent_connect};
use crate::harness::{POLL_DEADLINE, TestBroker};

const COUNT: u32 = 300;
const TOPIC: &str = "stream";
/// Messages a connection receives before the client connects again.
const PER_CONNECTION: usize = 20;

/// With the default write pacing, held writes leave more in flight at each takeover, so a new
/// connection reaches its quota from resends alone and moves the session on while it is still
/// being fenced.
#[test]
fn no_message_lost_while_the_session_moves() {
    stream_through_takeovers("", 1);
}

#[test]
fn no_message_lost_while_the_session_moves_without_write_pacing() {
    stream_through_takeovers("[runtime]\nwrite_interval_us = 0\n", 1);
}

/// Three CONNECTs at once: the session passes through shards that hand it straight on to a
/// newer connection without ever announcing it.
#[test]
fn no_message_lost_while_reconnects_overtake_each_other() {
    stream_through_takeovers("", 3);
}

/// Streams COUNT messages; every PER_CONNECTION received, `contenders` connections send the
/// same CONNECT at once and the one left open carries on.
fn stream_through_takeovers(config: &str, contenders: usize) {
    let broker = TestBroker::with_config(config);
    let addr = broker.addr();
    let connect = persistent_connect(V5, "mover", 300);
    let mut current = RawClient::connected(addr, connect.clone());
    current.subscribe(TOPIC, QoS::AtLeastOnce);
    let producer = produce(addr);
    let mut check = StreamCheck::default();
    while check.seen.len() < COUNT as usize {
        check.arrived(&current.expect_publish_acked());
        if check.this_connection.len() == PER_CONNECTION {
            check.this_connection.clear();
            let mut encoded = bytes::BytesMut::new();
            codec::encode(&Packet::from(connect.clone()), V5, &mut encoded).expect("encodes");
            let mut rivals: Vec<RawClient> =
                (0..contenders).map(|_| RawClient::open(addr, V5)).collect();
            for rival in &mut rivals {
                rival.send_raw(&encoded);
            }
            let (mut next, read) = survivor(rivals);
            next.unread(read);
            assert!(next.expect_connack().session_present);
            current.expect_closed();
            current = next;
        }
    }
    producer.join().expect("producer finished");
}

fn produce(addr: SocketAddr) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut publisher = RawClient::connected_clean(addr, V311, "streamer");
        for i in 0..COUNT {
            publisher.publish_simple(TOPIC, &i.to_be_bytes(), QoS::AtLeastOnce);
        }
    })
}

/// The one connection the broker keeps open of several with the same client id, and what was
/// read from it while the others were being closed.
fn survivor(mut rivals: Vec<RawClient>) -> (RawClient, Vec<Packet>) {
    let mut read: Vec<Vec<Packet>> = rivals.iter().map(|_| Vec::new()).collect();
    let deadline = Instant::now() + POLL_DEADLINE;
    while rivals.len() > 1 {
        assert!(
            Instant::now() < deadline,
            "{} connections stayed open",
            rivals.len()
        );
        let mut i = 0;
        while i < rivals.len() {
            match rivals[i].next_event(Duration::from_millis(5)) {
                Event::Packet(packet) => read[i].push(*packet),
                Event::Closed => {
                    rivals.remove(i);
                    read.remove(i);
                    continue;
                }
                Event::Timeout => {}
            }
            i += 1;
        }
    }
    (rivals.remove(0), read.remove(0))
}

/// What the subscriber has seen.
#[derive(Default)]
struct StreamCheck {
    seen: HashSet<u32>,
    /// Message, DUP and packet id of each arrival on the current connection.
    this_connection: Vec<(u32, bool, Option<u16>)>,
}

impl StreamCheck {
    fn arrived(&mut self, publish: &Publish) {
        let n = u32::from_be_bytes(publish.payload()[..].try_into().expect("4 bytes"));
        if !self.seen.insert(n) {
            assert!(publish.dup, "a repeated message {n} has DUP set");
        }
        let last = self.this_connection.last().map(|(m, _, _)| *m);
        self.this_connection
            .push((n, publish.dup, publish.packet_id.map(|id| id.get())));
        if let Some(last) = last {
            assert!(
                n > last,
                "message {n} arrived after {last} on the same connection \
                 (message, DUP, packet id so far: {:?})",
                self.this_connection
            );
        }
    }
}
