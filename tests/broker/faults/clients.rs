//! The fault suite's clients: publishers that record every message acknowledged with Success,
//! and persistent subscribers that record every delivery (a QoS 2 receiver keeps the packet
//! ids awaiting PUBREL across reconnects, as its session does). Each reconnects on its own;
//! it leaves its home node only when the node refuses TCP connections (killed).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use codec::{Packet, PubComp, PubRec, PubRel, QoS, ReasonCode};

use crate::client::{
    Event, RawClient, V5, connect_packet, persistent_connect, publish_packet, qos_options,
    subscribe_packet,
};

/// One PUBLISH every `PACE` while fewer than `WINDOW` wait for their acknowledgement.
const PACE: Duration = Duration::from_millis(10);
const WINDOW: usize = 20;
/// Every `RETAINED_EVERY`th message is also retained, on one of `RETAINED_TOPICS` topics.
const RETAINED_EVERY: u32 = 10;
const RETAINED_TOPICS: u32 = 4;
/// A connection that answers nothing for this long is given up (a frozen node, a stall).
const NO_PROGRESS: Duration = Duration::from_secs(15);

/// A message's identity: its publisher, QoS and number.
pub fn message_id(publisher: u8, qos: QoS, seq: u32) -> u64 {
    (u64::from(publisher) << 40) | ((qos as u64) << 32) | u64::from(seq)
}

/// The QoS a message was published with.
pub fn published_qos(id: u64) -> u8 {
    ((id >> 32) & 0xff) as u8
}

/// What a publisher saw.
#[derive(Debug, Default)]
pub struct Published {
    /// Accepted (PUBACK, or PUBREC for QoS 2, with a reason below 0x80: Success or No
    /// matching subscribers), retained ones apart.
    pub acked: BTreeSet<u64>,
    /// When each was acknowledged.
    pub acked_at: BTreeMap<u64, Instant>,
    /// Refused with a reason code.
    pub refused: u64,
    /// The refusals by reason code.
    pub refused_by: BTreeMap<u8, u64>,
    /// Sent, never answered (the connection was lost first).
    pub unknown: u64,
    /// The last message acknowledged per retained topic.
    pub retained: BTreeMap<String, u64>,
    /// Connection attempts the broker's address refused (nothing listening).
    pub refused_connects: u64,
}

/// What a subscriber saw.
#[derive(Debug, Default)]
pub struct Received {
    /// Deliveries per message (a QoS 2 message counted once per new packet id).
    pub counts: BTreeMap<u64, u32>,
    /// When a message delivered more than once arrived the second time.
    pub again_at: BTreeMap<u64, std::time::Instant>,
    /// When each message arrived first (where a duplicate's first copy came from).
    pub first_at: BTreeMap<u64, std::time::Instant>,
    /// Publishers whose probe arrived.
    pub probes: BTreeSet<u8>,
    /// Subscribed on its first connection.
    pub subscribed: bool,
    /// Reconnections that found no session (its messages meanwhile are lost).
    pub sessions_lost: u32,
    /// Connection attempts the broker's address refused (nothing listening).
    pub refused_connects: u64,
}

/// Why a connection attempt failed.
enum NotConnected {
    /// Nothing listened on the address.
    Refused,
    /// Any other failure (a timeout, a CONNACK refusal, a close).
    Failed,
}

/// Connects to `addr` with `connect`; the client once its CONNACK is Success.
fn connect_to(
    addr: SocketAddr,
    connect: codec::Connect,
) -> Result<(RawClient, bool), NotConnected> {
    let stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => NotConnected::Refused,
            _ => NotConnected::Failed,
        })?;
    connect_over(stream, connect).ok_or(NotConnected::Failed)
}

fn connect_over(stream: TcpStream, connect: codec::Connect) -> Option<(RawClient, bool)> {
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .ok()?;
    let mut client = RawClient::over(stream, V5);
    client.send(&Packet::from(connect));
    match client.next_event(Duration::from_secs(5)) {
        Event::Packet(packet) => match *packet {
            Packet::ConnAck(ack) if ack.reason_code == ReasonCode::Success => {
                Some((client, ack.session_present))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The node to try next: home first, the next ones while connecting fails.
fn pick(addrs: &[SocketAddr], home: usize, failures: usize) -> SocketAddr {
    addrs[(home + failures) % addrs.len()]
}

/// Publishes QoS `qos` messages on `f/<index>` (some retained on `r/<index>/<k>`) until
/// `stop`, then waits a while for the last answers.
pub fn publisher(
    index: u8,
    qos: QoS,
    addrs: Vec<SocketAddr>,
    home: usize,
    stop: Arc<AtomicBool>,
) -> JoinHandle<Published> {
    std::thread::spawn(move || {
        let mut published = Published::default();
        let mut seq = 0u32;
        let mut failures = 0;
        while !stop.load(Ordering::Relaxed) {
            let connect = connect_packet(V5, &format!("fault-pub-{index}"), true);
            let client = match connect_to(pick(&addrs, home, failures), connect) {
                Ok((client, _)) => client,
                Err(not) => {
                    published.refused_connects += u64::from(matches!(not, NotConnected::Refused));
                    failures += 1;
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
            };
            failures = 0;
            let session = PublishSession {
                index,
                qos,
                client,
                outstanding: BTreeMap::new(),
            };
            session.run(&mut seq, &mut published, &stop);
        }
        published
    })
}

struct PublishSession {
    index: u8,
    qos: QoS,
    client: RawClient,
    /// By packet id: the message and its retained topic.
    outstanding: BTreeMap<u16, (u64, Option<String>)>,
}

impl PublishSession {
    /// Publishes until the connection is lost or `stop` (then drains the answers).
    fn run(mut self, seq: &mut u32, published: &mut Published, stop: &AtomicBool) {
        let mut next = Instant::now();
        let mut progress = Instant::now();
        let mut drain_until = None;
        loop {
            let stopping = stop.load(Ordering::Relaxed);
            if stopping && drain_until.is_none() {
                drain_until = Some(Instant::now() + Duration::from_secs(10));
            }
            if drain_until
                .is_some_and(|until| self.outstanding.is_empty() || Instant::now() > until)
            {
                break;
            }
            if !stopping && Instant::now() >= next && self.outstanding.len() < WINDOW {
                *seq += 1;
                self.send(*seq);
                next += PACE;
            }
            match self.client.next_event(Duration::from_millis(5)) {
                Event::Packet(packet) => {
                    if self.answer(*packet, published) {
                        progress = Instant::now();
                    }
                }
                Event::Closed => break,
                Event::Timeout => {}
            }
            if !self.outstanding.is_empty() && progress.elapsed() > NO_PROGRESS {
                break;
            }
        }
        published.unknown += self.outstanding.len() as u64;
    }

    fn send(&mut self, seq: u32) {
        let id = message_id(self.index, self.qos, seq);
        let retained = seq.is_multiple_of(RETAINED_EVERY).then(|| {
            format!(
                "r/{}/{}",
                self.index,
                (seq / RETAINED_EVERY) % RETAINED_TOPICS
            )
        });
        let topic = retained
            .clone()
            .unwrap_or_else(|| format!("f/{}", self.index));
        let mut packet_id = self.client.next_packet_id();
        while self.outstanding.contains_key(&packet_id) {
            packet_id = self.client.next_packet_id();
        }
        let mut publish = publish_packet(&topic, &id.to_be_bytes(), self.qos, Some(packet_id));
        publish.retain = retained.is_some();
        self.client.send(&Packet::Publish(publish));
        self.outstanding.insert(packet_id, (id, retained));
    }

    /// Records an answer; whether it was one.
    fn answer(&mut self, packet: Packet, published: &mut Published) -> bool {
        let (packet_id, reason) = match packet {
            Packet::PubAck(ack) => (ack.packet_id, ack.reason_code),
            Packet::PubRec(rec) => {
                if !rec.reason_code.is_error() {
                    self.client
                        .send(&Packet::PubRel(PubRel::new(rec.packet_id)));
                }
                (rec.packet_id, rec.reason_code)
            }
            Packet::PubComp(_) => return true,
            _ => return false,
        };
        let Some((id, retained)) = self.outstanding.remove(&packet_id.get()) else {
            return false;
        };
        // Any reason below 0x80 accepts the message (0x10 No matching subscribers too).
        if !reason.is_error() {
            match retained {
                Some(topic) => {
                    let last = published.retained.entry(topic).or_default();
                    *last = (*last).max(id);
                }
                None => {
                    published.acked.insert(id);
                    published.acked_at.insert(id, Instant::now());
                }
            }
        } else {
            published.refused += 1;
            *published.refused_by.entry(reason as u8).or_default() += 1;
        }
        true
    }
}

/// A persistent subscriber (`f/#` and `f/probe/#` at QoS 2) on `addrs[home]` until `stop`.
pub fn subscriber(
    index: u8,
    addrs: Vec<SocketAddr>,
    home: usize,
    stop: Arc<AtomicBool>,
) -> (JoinHandle<()>, Arc<Mutex<Received>>) {
    let received = Arc::new(Mutex::new(Received::default()));
    let record = Arc::clone(&received);
    let handle = std::thread::spawn(move || {
        // Packet ids of QoS 2 messages received and not yet released: the session's state.
        let mut awaiting_release: BTreeSet<u16> = BTreeSet::new();
        let mut failures = 0;
        let mut first = true;
        while !stop.load(Ordering::Relaxed) {
            let mut connect = persistent_connect(V5, &format!("fault-sub-{index}"), 3600);
            connect.clean_start = first;
            let (mut client, present) = match connect_to(pick(&addrs, home, failures), connect) {
                Ok(connected) => connected,
                Err(not) => {
                    lock(&record).refused_connects +=
                        u64::from(matches!(not, NotConnected::Refused));
                    failures += 1;
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
            };
            failures = 0;
            if !present {
                if !first {
                    lock(&record).sessions_lost += 1;
                }
                // A new session: the old one's state goes with it (MQTT-3.2.2-5), its QoS 2
                // packet ids included; kept, a new message reusing one would be taken for a
                // duplicate and never recorded.
                awaiting_release.clear();
                let filter = subscribe_packet(
                    client.next_packet_id(),
                    "f/#",
                    qos_options(QoS::ExactlyOnce),
                );
                client.send(&Packet::Subscribe(filter));
            }
            first = false;
            receive(&mut client, &record, &mut awaiting_release, &stop);
        }
    });
    (handle, received)
}

/// Reads and acknowledges deliveries until the connection is lost or `stop`.
fn receive(
    client: &mut RawClient,
    record: &Mutex<Received>,
    awaiting_release: &mut BTreeSet<u16>,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Relaxed) {
        let packet = match client.next_event(Duration::from_millis(100)) {
            Event::Packet(packet) => *packet,
            Event::Closed => return,
            Event::Timeout => continue,
        };
        match packet {
            Packet::SubAck(_) => lock(record).subscribed = true,
            Packet::PubRel(rel) => {
                awaiting_release.remove(&rel.packet_id.get());
                client.send(&Packet::PubComp(PubComp::new(rel.packet_id)));
            }
            Packet::Publish(publish) => {
                let new = match (publish.qos, publish.packet_id) {
                    (QoS::ExactlyOnce, Some(id)) => {
                        client.send(&Packet::PubRec(PubRec::new(id)));
                        awaiting_release.insert(id.get())
                    }
                    (_, id) => {
                        if let Some(id) = id {
                            client.send(&Packet::PubAck(codec::PubAck::new(id)));
                        }
                        true
                    }
                };
                if new {
                    note(&mut lock(record), publish.topic(), publish.payload());
                }
            }
            Packet::Disconnect(_) => return,
            _ => {}
        }
    }
}

fn note(received: &mut Received, topic: &str, payload: &[u8]) {
    if let Some(publisher) = topic.strip_prefix("f/probe/") {
        if let Ok(publisher) = publisher.parse() {
            received.probes.insert(publisher);
        }
        return;
    }
    if let Some(id) = payload.first_chunk::<8>() {
        let id = u64::from_be_bytes(*id);
        let count = received.counts.entry(id).or_default();
        *count += 1;
        let now = std::time::Instant::now();
        match *count {
            1 => drop(received.first_at.insert(id, now)),
            2 => drop(received.again_at.insert(id, now)),
            _ => {}
        }
    }
}

pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
