//! One connected period of a bridge: the remote and the local connection up, their reader
//! threads feeding packets in as [`Event`]s, and this thread forwarding messages both ways
//! and acknowledging each source only after its destination did.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use codec::{
    Disconnect, Packet, PacketId, ProtocolVersion, PubAck, PubComp, PubRec, PubRel, Publish,
    PublishPropertiesBox, QoS, ReasonCode, RetainHandling, SubAck, Subscribe, SubscribeProperties,
    SubscriptionOptions, TopicPayload,
};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use tracing::{debug, warn};

use super::echo::EchoGuard;
use super::error::BridgeError;
use super::flow::{Forwarded, Lane, SUBSCRIBE_ID};
use super::link::LinkWriter;
use super::mqtt::{self, mqtt_str};
use super::stats::BridgeCounters;
use super::topics::map_first;
use crate::settings::{BridgeSettings, TopicRule};

/// Longest wait for an event before the stop flag is looked at again.
pub(crate) const TICK: Duration = Duration::from_millis(250);

/// Which connection a packet came from or goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Remote,
    Local,
}

impl Side {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Remote => "remote",
            Self::Local => "local",
        }
    }
}

/// What reaches a bridge's thread.
pub(crate) enum Event {
    /// A packet read by the reader of connection `side` of period `epoch`.
    Packet {
        epoch: u64,
        side: Side,
        packet: Packet,
    },
    /// That reader's connection ended.
    Closed {
        epoch: u64,
        side: Side,
        error: BridgeError,
    },
    /// The bridge is removed or the broker stops.
    Stop,
}

/// How a connected period ended without an error.
pub(crate) enum Ended {
    Stopped,
}

/// One connection's writing side and its keep-alive.
pub(crate) struct Peer {
    writer: LinkWriter,
    protocol: ProtocolVersion,
    keep_alive: Option<Duration>,
    /// Largest packet the other broker accepts.
    max_packet: Option<u32>,
    last_sent: Instant,
    last_received: Instant,
    ping_sent: Option<Instant>,
}

impl Peer {
    /// A connected peer; `keep_alive` in seconds (0: none).
    pub(crate) fn new(
        writer: LinkWriter,
        protocol: ProtocolVersion,
        keep_alive: u16,
        max_packet: Option<u32>,
    ) -> Self {
        let now = Instant::now();
        Self {
            writer,
            protocol,
            keep_alive: (keep_alive != 0).then(|| Duration::from_secs(keep_alive.into())),
            max_packet,
            last_sent: now,
            last_received: now,
            ping_sent: None,
        }
    }

    /// Encodes and writes `packet`.
    pub(crate) fn send(&mut self, packet: &Packet) -> Result<(), BridgeError> {
        mqtt::send(&mut self.writer, self.protocol, packet)?;
        self.last_sent = Instant::now();
        Ok(())
    }

    /// PINGREQ when the connection has been quiet; an error when a PINGREQ went unanswered
    /// for a whole keep-alive.
    fn keep_alive(&mut self, now: Instant) -> Result<(), BridgeError> {
        let Some(keep_alive) = self.keep_alive else {
            return Ok(());
        };
        if let Some(sent) = self.ping_sent {
            if now.duration_since(sent) > keep_alive {
                return Err(BridgeError::Timeout);
            }
            return Ok(());
        }
        let quiet = now.duration_since(self.last_sent) >= keep_alive * 3 / 4
            || now.duration_since(self.last_received) >= keep_alive;
        if quiet {
            self.send(&Packet::PingReq(codec::PingReq))?;
            self.ping_sent = Some(now);
        }
        Ok(())
    }

    fn too_large(&self, publish: &Publish) -> bool {
        let Some(max) = self.max_packet else {
            return false;
        };
        let packet = Packet::Publish(publish.clone());
        codec::encoded_len(&packet, self.protocol).map_or(true, |len| len > max as usize)
    }

    /// Tells the source its message is taken care of.
    fn acknowledge(&mut self, forwarded: Forwarded) -> Result<(), BridgeError> {
        self.acknowledge_id(forwarded.source, forwarded.qos)
    }

    fn acknowledge_id(&mut self, id: PacketId, qos: QoS) -> Result<(), BridgeError> {
        match qos {
            QoS::AtMostOnce => Ok(()),
            QoS::AtLeastOnce => self.send(&Packet::PubAck(PubAck::new(id))),
            QoS::ExactlyOnce => self.send(&Packet::PubRec(PubRec::new(id))),
        }
    }
}

/// A connected period: both peers and both lanes.
pub(crate) struct Session<'a> {
    settings: &'a BridgeSettings,
    counters: &'a BridgeCounters,
    remote: Peer,
    local: Peer,
    /// Local to remote.
    out: Lane,
    /// Remote to local.
    inward: Lane,
    /// SUBACKs still to come: the bridge counts as connected once both have arrived.
    subacks_due: u8,
    /// Towards a remote without No Local or bridge marker: what may come back.
    echo: Option<EchoGuard>,
}

impl<'a> Session<'a> {
    /// `remote_window`/`local_window`: the Receive Maximum each broker announced.
    pub(crate) fn new(
        settings: &'a BridgeSettings,
        counters: &'a BridgeCounters,
        (remote, remote_window): (Peer, usize),
        (local, local_window): (Peer, usize),
        guard_echo: bool,
    ) -> Self {
        Self {
            settings,
            counters,
            remote,
            local,
            out: Lane::new(remote_window),
            inward: Lane::new(local_window),
            subacks_due: 0,
            echo: guard_echo.then(EchoGuard::default),
        }
    }

    /// Subscribes on both sides, then forwards until a connection fails or `Stop` arrives.
    pub(crate) fn run(
        &mut self,
        events: &Receiver<Event>,
        epoch: u64,
        stop: &AtomicBool,
    ) -> Result<Ended, BridgeError> {
        self.subscribe(Side::Local)?;
        self.subscribe(Side::Remote)?;
        if self.subacks_due == 0 {
            self.counters.set_connected(true);
        }
        loop {
            if stop.load(Ordering::Relaxed) {
                self.goodbye();
                return Ok(Ended::Stopped);
            }
            match events.recv_timeout(TICK) {
                Ok(Event::Stop) => {
                    self.goodbye();
                    return Ok(Ended::Stopped);
                }
                Ok(Event::Packet {
                    epoch: e,
                    side,
                    packet,
                }) if e == epoch => {
                    self.peer(side).last_received = Instant::now();
                    self.handle(side, packet)?;
                }
                Ok(Event::Closed {
                    epoch: e,
                    side,
                    error,
                }) if e == epoch => {
                    return Err(BridgeError::Lost {
                        side: side.name(),
                        cause: error.to_string(),
                    });
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(BridgeError::Closed),
            }
            let now = Instant::now();
            self.remote.keep_alive(now)?;
            self.local.keep_alive(now)?;
        }
    }

    /// A normal DISCONNECT on both connections (the local session and, unless clean_start,
    /// the remote one stay for the next connection).
    fn goodbye(&mut self) {
        let _ = self.remote.send(&Packet::Disconnect(Disconnect::default()));
        let _ = self.local.send(&Packet::Disconnect(Disconnect::default()));
    }

    fn peer(&mut self, side: Side) -> &mut Peer {
        match side {
            Side::Remote => &mut self.remote,
            Side::Local => &mut self.local,
        }
    }

    fn subscribe(&mut self, side: Side) -> Result<(), BridgeError> {
        let filters = subscriptions(&self.settings.topics, side)?;
        if filters.is_empty() {
            return Ok(());
        }
        let packet_id = PacketId::new(SUBSCRIBE_ID).ok_or(BridgeError::Closed)?;
        self.subacks_due += 1;
        self.peer(side).send(&Packet::Subscribe(Subscribe {
            packet_id,
            filters,
            properties: SubscribeProperties::default(),
        }))
    }

    fn handle(&mut self, side: Side, packet: Packet) -> Result<(), BridgeError> {
        match packet {
            Packet::Publish(publish) => self.on_publish(side, publish),
            Packet::PubAck(ack) => self.on_delivered(side, ack.packet_id, ack.reason_code),
            Packet::PubRec(rec) if rec.reason_code.is_error() => {
                self.on_delivered(side, rec.packet_id, rec.reason_code)
            }
            Packet::PubRec(rec) => self
                .peer(side)
                .send(&Packet::PubRel(PubRel::new(rec.packet_id))),
            Packet::PubComp(comp) => self.on_delivered(side, comp.packet_id, comp.reason_code),
            Packet::PubRel(rel) => self
                .peer(side)
                .send(&Packet::PubComp(PubComp::new(rel.packet_id))),
            Packet::SubAck(ack) => {
                self.on_suback(side, &ack);
                self.subacks_due = self.subacks_due.saturating_sub(1);
                if self.subacks_due == 0 {
                    self.counters.set_connected(true);
                }
                Ok(())
            }
            Packet::PingResp(_) => {
                self.peer(side).ping_sent = None;
                Ok(())
            }
            Packet::Disconnect(disconnect) => Err(BridgeError::Lost {
                side: side.name(),
                cause: format!("DISCONNECT {}", disconnect.reason_code.name()),
            }),
            other => {
                debug!(bridge = %self.settings.name, side = side.name(), packet = ?other.packet_type(), "ignored");
                Ok(())
            }
        }
    }

    fn on_suback(&self, side: Side, ack: &SubAck) {
        let filters = subscriptions(&self.settings.topics, side).unwrap_or_default();
        for (index, reason) in ack.reason_codes.iter().enumerate() {
            if reason.is_error() {
                let filter = filters.get(index).map(|(f, _)| f.as_str().to_owned());
                warn!(bridge = %self.settings.name, side = side.name(), ?filter, reason = reason.name(), "subscription refused");
            }
        }
    }

    /// A message from `source`: mapped and queued for the other side, or (no rule maps it)
    /// acknowledged and dropped.
    fn on_publish(&mut self, source: Side, publish: Publish) -> Result<(), BridgeError> {
        let (lane, map): (_, fn(&TopicRule, &str) -> Option<String>) = match source {
            Side::Local => (&mut self.out, TopicRule::to_remote),
            Side::Remote => (&mut self.inward, TopicRule::to_local),
        };
        if let (QoS::ExactlyOnce, Some(id)) = (publish.qos, publish.packet_id)
            && lane.carries(id)
        {
            return Ok(());
        }
        let echo = source == Side::Remote
            && self.echo.as_mut().is_some_and(|guard| {
                guard.is_echo(publish.topic(), publish.payload(), Instant::now())
            });
        if echo {
            return match publish.packet_id {
                Some(id) => self.remote.acknowledge_id(id, publish.qos),
                None => Ok(()),
            };
        }
        let Some(topic) = map_first(&self.settings.topics, publish.topic(), map) else {
            debug!(bridge = %self.settings.name, topic = publish.topic(), "no rule maps the topic; dropped");
            self.counters.count_dropped();
            return match publish.packet_id {
                Some(id) => self.peer(source).acknowledge_id(id, publish.qos),
                None => Ok(()),
            };
        };
        let source_id = publish.packet_id;
        let forwarded = Publish {
            dup: false,
            qos: publish.qos,
            retain: publish.retain,
            packet_id: None,
            content: TopicPayload::new(mqtt_str(&topic)?, publish.content.shared_payload()),
            properties: forwarded_properties(publish.properties),
        };
        lane.push(forwarded, source_id);
        self.flush(other(source))
    }

    /// The destination `side` acknowledged `id` for good: acknowledge the source, count, and
    /// send what waited for the window.
    fn on_delivered(
        &mut self,
        side: Side,
        id: PacketId,
        reason: ReasonCode,
    ) -> Result<(), BridgeError> {
        let lane = match side {
            Side::Remote => &mut self.out,
            Side::Local => &mut self.inward,
        };
        let Some(forwarded) = lane.complete(id) else {
            debug!(bridge = %self.settings.name, side = side.name(), %id, "acknowledgement for an unknown packet id");
            return Ok(());
        };
        if reason.is_error() {
            debug!(bridge = %self.settings.name, side = side.name(), reason = reason.name(), "message refused; dropped");
            self.counters.count_dropped();
        } else {
            self.count_delivered(side);
        }
        self.peer(other(side)).acknowledge(forwarded)?;
        self.flush(side)
    }

    fn count_delivered(&self, destination: Side) {
        match destination {
            Side::Remote => self.counters.count_out(),
            Side::Local => self.counters.count_in(),
        }
    }

    /// Sends what may go to `destination` now.
    fn flush(&mut self, destination: Side) -> Result<(), BridgeError> {
        let (lane, to, from) = match destination {
            Side::Remote => (&mut self.out, &mut self.remote, &mut self.local),
            Side::Local => (&mut self.inward, &mut self.local, &mut self.remote),
        };
        while let Some(publish) = lane.next_to_send() {
            if to.too_large(&publish) {
                warn!(bridge = %self.settings.name, side = destination.name(), topic = publish.topic(), "message larger than the broker accepts; dropped");
                self.counters.count_dropped();
                if let Some(forwarded) = publish.packet_id.and_then(|id| lane.complete(id)) {
                    from.acknowledge(forwarded)?;
                }
                continue;
            }
            let qos0 = publish.qos == QoS::AtMostOnce;
            if let (Side::Remote, Some(guard)) = (destination, self.echo.as_mut())
                && map_first(&self.settings.topics, publish.topic(), TopicRule::to_local).is_some()
            {
                guard.sent(publish.topic(), publish.payload(), Instant::now());
            }
            to.send(&Packet::Publish(publish))?;
            if qos0 {
                match destination {
                    Side::Remote => self.counters.count_out(),
                    Side::Local => self.counters.count_in(),
                }
            }
        }
        Ok(())
    }
}

fn other(side: Side) -> Side {
    match side {
        Side::Remote => Side::Local,
        Side::Local => Side::Remote,
    }
}

/// A message's properties as they cross: a topic alias and subscription identifiers belong
/// to the connection they came on.
fn forwarded_properties(properties: PublishPropertiesBox) -> PublishPropertiesBox {
    let mut properties = properties.into_inner();
    properties.topic_alias = None;
    properties.subscription_identifiers.clear();
    PublishPropertiesBox::new(properties)
}

/// The filters the bridge subscribes to on `side`: No Local (the bridge never gets its own
/// messages back), RETAIN as published, retained messages only for a new subscription.
pub(crate) fn subscriptions(
    rules: &[TopicRule],
    side: Side,
) -> Result<Vec<(codec::MqttStr, SubscriptionOptions)>, BridgeError> {
    rules
        .iter()
        .filter(|rule| match side {
            Side::Local => rule.direction.outgoing(),
            Side::Remote => rule.direction.incoming(),
        })
        .map(|rule| {
            let filter = match side {
                Side::Local => rule.local_filter(),
                Side::Remote => rule.remote_filter(),
            };
            let options = SubscriptionOptions {
                qos: rule.qos,
                no_local: true,
                retain_as_published: true,
                retain_handling: RetainHandling::SendIfNew,
            };
            Ok((mqtt_str(&filter)?, options))
        })
        .collect()
}
