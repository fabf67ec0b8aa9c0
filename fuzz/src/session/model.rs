//! What one fuzzed client knows, and the invariants every packet the broker sends it must keep.

use std::collections::{BTreeMap, HashMap, VecDeque};

use codec::{Packet, PacketId, ProtocolVersion, Publish, QoS};
use ring_runtime::ConnId;

/// Topics the clients publish to.
pub const TOPICS: [&str; 3] = ["a/b", "a/c", "x"];
/// Filters the clients subscribe to.
pub const FILTERS: [&str; 5] = ["a/b", "a/+", "x", "#", "$share/g/a/+"];

/// Whether `FILTERS[filter]` matches `topic`.
pub fn matches(filter: usize, topic: &str) -> bool {
    match FILTERS[filter] {
        "a/+" | "$share/g/a/+" => topic.strip_prefix("a/").is_some_and(|l| !l.contains('/')),
        "#" => !topic.starts_with('$'),
        exact => exact == topic,
    }
}

/// A subscription's state as far as the client can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sub {
    /// A SUBSCRIBE was sent: it may be in effect.
    Maybe,
    /// Certainly not subscribed to anything published after message number `since`.
    None { since: u64 },
}

/// Where an outgoing QoS 1/2 PUBLISH (broker to client) is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Published(QoS),
    /// The client sent PUBREC; the broker owes PUBREL.
    Received,
    /// PUBREL seen; the client owes PUBCOMP.
    Released,
}

/// An unacknowledged QoS 1/2 PUBLISH sent to the client.
#[derive(Clone, Copy, Debug)]
pub struct Outstanding {
    pub stage: Stage,
    /// The connection number it was last sent on.
    pub conn_no: u32,
    /// Re-sent on a later connection (session resumed).
    pub resent: bool,
}

/// Whether PUBLISHes re-sent to a resumed session count in the Receive Maximum check. They do
/// (MQTT-3.3.4-9); this target found the broker re-sending all of them at once (reproducer:
/// fuzz/artifacts/broker_session/receive-maximum-on-resume), fixed in `take_resends`.
const RESENDS_COUNT_IN_WINDOW: bool = true;

/// One live (or closing) connection of a client.
#[derive(Debug)]
pub struct Link {
    pub conn: ConnId,
    pub no: u32,
    /// `None` until CONNECT is sent (garbage first): decoded as 5.0.
    pub protocol: Option<ProtocolVersion>,
    /// The window the broker must respect: min(Receive Maximum, configured bound).
    pub window: usize,
    pub alias_max: u16,
    pub aliases: HashMap<u16, String>,
    pub connacked: bool,
    /// Filters (bits) this connection sent SUBSCRIBE for: in effect whatever its CONNACK says.
    pub subscribed: u8,
    /// The broker closed it or shut its write side: nothing may arrive any more.
    pub done: bool,
    pub split: bool,
    /// Garbage went out before its CONNECT: the broker may have read another protocol, so
    /// its output is only checked to decode.
    pub garbled: bool,
}

/// One client (one client identifier) of the run.
#[derive(Debug)]
pub struct Client {
    pub index: usize,
    pub link: Option<Link>,
    /// Older connections, superseded by a reconnect, that may still receive a goodbye.
    pub old: Vec<Link>,
    pub outstanding: BTreeMap<u16, Outstanding>,
    pub subs: [Sub; FILTERS.len()],
    pub epochs: [u32; FILTERS.len()],
    /// Per UNSUBSCRIBE packet id, in order: the filters and their epochs when sent.
    pub unsubs: HashMap<u16, VecDeque<Vec<(usize, u32)>>>,
    pub subscribes: HashMap<u16, usize>,
}

impl Client {
    pub fn new(index: usize) -> Self {
        Self {
            index,
            link: None,
            old: Vec::new(),
            outstanding: BTreeMap::new(),
            subs: [Sub::None { since: 0 }; FILTERS.len()],
            epochs: [0; FILTERS.len()],
            unsubs: HashMap::new(),
            subscribes: HashMap::new(),
        }
    }

    /// A fresh session: nothing subscribed, nothing outstanding.
    fn session_reset(&mut self, seq: u64, subscribed: u8) {
        self.outstanding.clear();
        for (filter, sub) in self.subs.iter_mut().enumerate() {
            if subscribed & (1 << filter) == 0 {
                *sub = Sub::None { since: seq };
            }
        }
        for epoch in &mut self.epochs {
            *epoch += 1;
        }
        self.unsubs.clear();
    }

    /// Checks and records `packets`, which the broker sent on `link` (the current one when
    /// `current`); `seq` is the number of the last message published so far.
    pub fn observe(&mut self, link_no: u32, packets: Vec<Packet>, seq: u64) {
        for packet in packets {
            self.observe_one(link_no, packet, seq);
        }
    }

    fn link_mut(&mut self, no: u32) -> &mut Link {
        let link = self.link.iter_mut().chain(self.old.iter_mut()).find(|l| l.no == no);
        link.expect("invariant: observed links exist")
    }

    fn observe_one(&mut self, no: u32, packet: Packet, seq: u64) {
        let index = self.index;
        let link = self.link_mut(no);
        let protocol = link.protocol.unwrap_or(ProtocolVersion::V5);
        assert!(!link.done, "client {index}: a packet after the connection ended: {packet:?}");
        let is_connack = matches!(packet, Packet::ConnAck(_));
        assert_eq!(
            is_connack, !link.connacked,
            "client {index}: CONNACK must come first and once, got {packet:?}"
        );
        match packet {
            Packet::ConnAck(ack) => {
                link.connacked = true;
                let subscribed = link.subscribed;
                let is_current = self.link.as_ref().is_some_and(|l| l.no == no);
                if !ack.reason_code.is_error() && is_current && !ack.session_present {
                    self.session_reset(seq, subscribed);
                }
            }
            Packet::Publish(publish) => self.received_publish(no, publish),
            // The answer to a PUBREC for no QoS 2 PUBLISH: 0x92 on 5.0; 3.x cannot say so.
            Packet::PubRel(rel) if rel.reason_code.is_error() => {}
            Packet::PubRel(rel) => self.received_pubrel(no, rel.packet_id, protocol),
            Packet::UnsubAck(ack) => self.received_unsuback(ack.packet_id.get(), seq),
            Packet::SubAck(ack) => {
                self.subscribes.remove(&ack.packet_id.get());
            }
            Packet::Disconnect(_) | Packet::Auth(_) => assert!(
                protocol == ProtocolVersion::V5,
                "client {index}: {packet:?} on MQTT 3.x"
            ),
            Packet::PubAck(_) | Packet::PubRec(_) | Packet::PubComp(_) | Packet::PingResp(_) => {}
            Packet::Connect(_)
            | Packet::ConnectFrame(_)
            | Packet::Subscribe(_)
            | Packet::Unsubscribe(_)
            | Packet::PingReq(_) => panic!("client {index}: a client-only packet: {packet:?}"),
        }
    }

    fn received_publish(&mut self, no: u32, publish: Publish) {
        let index = self.index;
        let topic = self.resolve_topic(no, &publish);
        self.check_after_unsuback(&topic, publish.content.payload());
        let Some(id) = publish.packet_id else {
            assert_eq!(publish.qos, QoS::AtMostOnce, "client {index}: QoS > 0 without id");
            return;
        };
        let id = id.get();
        match self.outstanding.get(&id).copied() {
            None => {}
            Some(Outstanding { stage: Stage::Published(qos), conn_no, .. }) => {
                assert!(
                    conn_no != no,
                    "client {index}: packet id {id} reused while unacknowledged"
                );
                assert!(publish.dup, "client {index}: a re-delivery of {id} without DUP");
                assert_eq!(qos, publish.qos, "client {index}: re-delivery of {id} changed QoS");
            }
            Some(other) => panic!("client {index}: PUBLISH {id} re-sent after PUBREC: {other:?}"),
        }
        let stage = Stage::Published(publish.qos);
        let resent = self.outstanding.contains_key(&id);
        let entry = Outstanding { stage, conn_no: no, resent };
        self.outstanding.insert(id, entry);
        self.check_window(no);
    }

    /// The topic of `publish`, through the connection's topic aliases.
    fn resolve_topic(&mut self, no: u32, publish: &Publish) -> String {
        let index = self.index;
        let link = self.link_mut(no);
        let topic = publish.topic().to_owned();
        let Some(alias) = publish.properties.topic_alias else {
            assert!(!topic.is_empty(), "client {index}: an empty topic without an alias");
            return topic;
        };
        let alias = alias.get();
        assert!(
            alias <= link.alias_max,
            "client {index}: topic alias {alias} beyond the announced {}",
            link.alias_max
        );
        if topic.is_empty() {
            let known = link.aliases.get(&alias);
            known.cloned().unwrap_or_else(|| panic!("client {index}: unknown topic alias {alias}"))
        } else {
            link.aliases.insert(alias, topic.clone());
            topic
        }
    }

    /// No message published after the client's UNSUBACK arrives unless a subscription that
    /// may be in effect matches.
    fn check_after_unsuback(&self, topic: &str, payload: &[u8]) {
        let Ok(seq) = <[u8; 8]>::try_from(payload).map(u64::from_be_bytes) else {
            return;
        };
        let mut matching = (0..FILTERS.len()).filter(|&f| matches(f, topic)).peekable();
        if matching.peek().is_none() {
            return;
        }
        let allowed = matching.any(|f| match self.subs[f] {
            Sub::Maybe => true,
            Sub::None { since } => seq <= since,
        });
        assert!(
            allowed,
            "client {}: message {seq} on {topic} delivered with no subscription in effect: {:?}",
            self.index, self.subs
        );
    }

    /// Unacknowledged QoS 1/2 PUBLISHes sent on this connection stay within its window.
    fn check_window(&mut self, no: u32) {
        let window = self.link_mut(no).window;
        let counted = |o: &&Outstanding| o.conn_no == no && (RESENDS_COUNT_IN_WINDOW || !o.resent);
        let inflight = self.outstanding.values().filter(counted).count();
        assert!(
            inflight <= window,
            "client {}: {inflight} unacknowledged PUBLISHes, window {window}",
            self.index
        );
    }

    fn received_pubrel(&mut self, no: u32, id: PacketId, protocol: ProtocolVersion) {
        let index = self.index;
        let id = id.get();
        let awaited = |o: &Outstanding| matches!(o.stage, Stage::Received | Stage::Released);
        if protocol != ProtocolVersion::V5 && !self.outstanding.get(&id).is_some_and(awaited) {
            return;
        }
        let entry = self.outstanding.get_mut(&id);
        let entry = entry.unwrap_or_else(|| panic!("client {index}: PUBREL {id} for nothing"));
        assert!(
            matches!(entry.stage, Stage::Received | Stage::Released),
            "client {index}: PUBREL {id} before PUBREC ({:?})",
            entry.stage
        );
        entry.resent |= entry.conn_no != no;
        entry.stage = Stage::Released;
        entry.conn_no = no;
        self.check_window(no);
    }

    fn received_unsuback(&mut self, id: u16, seq: u64) {
        let sent = self.unsubs.get_mut(&id).and_then(VecDeque::pop_front);
        let Some(filters) = sent else {
            return;
        };
        for (filter, epoch) in filters {
            if self.epochs[filter] == epoch {
                self.subs[filter] = Sub::None { since: seq };
            }
        }
    }

    /// The client acknowledges `id`: PUBACK, PUBREC or PUBCOMP as `kind` says.
    pub fn acknowledged(&mut self, id: u16, kind: AckKind) {
        let Some(entry) = self.outstanding.get_mut(&id) else {
            return;
        };
        match (kind, entry.stage) {
            (AckKind::PubAck, Stage::Published(QoS::AtLeastOnce))
            | (AckKind::PubComp, Stage::Released) => {
                self.outstanding.remove(&id);
            }
            (AckKind::PubRec, Stage::Published(QoS::ExactlyOnce)) => entry.stage = Stage::Received,
            _ => {}
        }
    }

    pub fn subscribing(&mut self, id: u16, filter: usize) {
        if let Some(link) = self.link.as_mut() {
            link.subscribed |= 1 << filter;
        }
        self.subs[filter] = Sub::Maybe;
        self.epochs[filter] += 1;
        self.subscribes.insert(id, filter);
    }

    pub fn unsubscribing(&mut self, id: u16, filter: usize) {
        let entry = vec![(filter, self.epochs[filter])];
        self.unsubs.entry(id).or_default().push_back(entry);
    }
}

/// An acknowledgement the client sends for a PUBLISH it received.
#[derive(Clone, Copy, Debug)]
pub enum AckKind {
    PubAck,
    PubRec,
    PubComp,
}
