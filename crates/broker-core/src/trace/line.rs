//! One trace line per packet: `HH:MM:SS.mmm in  client PUBLISH id=5 topic=a/b qos=1 dup=0
//! retain=0 payload=12B props={...} first=68656c6c6f`. What a line holds: the packet type, its
//! ids, topic or filters, QoS, flags, reason codes, properties when there are any, the payload
//! size and, when asked, its first bytes in hex. Never the password.

use std::fmt::Write;
use std::time::SystemTime;

use codec::{Packet, Publish, QoS};

/// Which way a packet went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the client.
    In,
    /// To the client.
    Out,
}

/// The fields of a PUBLISH that a line shows (an outgoing copy is not a decoded `Publish`).
#[derive(Debug, Clone, Copy)]
pub struct PacketLine<'a> {
    pub topic: &'a str,
    pub qos: QoS,
    pub packet_id: Option<u16>,
    pub dup: bool,
    pub retain: bool,
    pub payload: &'a [u8],
}

impl<'a> PacketLine<'a> {
    pub fn of(publish: &'a Publish) -> Self {
        Self {
            topic: publish.topic(),
            qos: publish.qos,
            packet_id: publish.packet_id.map(|id| id.get()),
            dup: publish.dup,
            retain: publish.retain,
            payload: publish.payload(),
        }
    }
}

/// The start of a line: the UTC time of day, the direction, the client.
fn head(direction: Direction, client: &str) -> String {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let millis = since.as_millis() % 86_400_000;
    let (h, m, s, ms) = (
        millis / 3_600_000,
        millis / 60_000 % 60,
        millis / 1000 % 60,
        millis % 1000,
    );
    let way = match direction {
        Direction::In => "in ",
        Direction::Out => "out",
    };
    format!("{h:02}:{m:02}:{s:02}.{ms:03} {way} {client}")
}

/// A PUBLISH's line.
pub fn publish_line(
    direction: Direction,
    client: &str,
    publish: PacketLine<'_>,
    properties: Option<&dyn std::fmt::Debug>,
    payload_bytes: usize,
) -> String {
    let mut line = head(direction, client);
    let _ = write!(line, " PUBLISH");
    if let Some(id) = publish.packet_id {
        let _ = write!(line, " id={id}");
    }
    let _ = write!(
        line,
        " topic={} qos={} dup={} retain={} payload={}B",
        publish.topic,
        publish.qos as u8,
        u8::from(publish.dup),
        u8::from(publish.retain),
        publish.payload.len()
    );
    if let Some(properties) = properties {
        let _ = write!(line, " props={properties:?}");
    }
    if payload_bytes > 0 {
        let _ = write!(line, " first=");
        for byte in publish.payload.iter().take(payload_bytes) {
            let _ = write!(line, "{byte:02x}");
        }
    }
    line
}

/// A PUBACK, PUBREC, PUBREL or PUBCOMP read without its body (Success).
pub fn short_ack_line(
    direction: Direction,
    client: &str,
    kind: codec::PacketType,
    id: u16,
) -> String {
    format!("{} {} id={id}", head(direction, client), kind.name())
}

/// Any other packet's line (a PUBLISH goes through [`publish_line`]).
pub fn packet_line(
    direction: Direction,
    client: &str,
    packet: &Packet,
    payload_bytes: usize,
) -> String {
    let mut line = head(direction, client);
    let _ = write!(line, " {}", packet.packet_type().name());
    match packet {
        Packet::Publish(publish) => {
            let properties = (!publish.properties.is_empty()).then_some(&*publish.properties);
            let debug = properties.map(|p| p as &dyn std::fmt::Debug);
            return publish_line(
                direction,
                client,
                PacketLine::of(publish),
                debug,
                payload_bytes,
            );
        }
        Packet::Connect(c) => connect_line(
            &mut line,
            c.client_id.as_str(),
            (c.clean_start, c.keep_alive),
            c.username.as_ref().map(|u| u.as_str()),
            c.will.as_ref().map(|w| w.topic.as_str()),
        ),
        Packet::ConnectFrame(c) => connect_line(
            &mut line,
            c.client_id(),
            (c.clean_start, c.keep_alive),
            c.username(),
            c.will_topic(),
        ),
        Packet::ConnAck(a) => {
            let _ = write!(
                line,
                " session_present={} reason={}",
                u8::from(a.session_present),
                a.reason_code.name()
            );
        }
        Packet::PubAck(a) => ack(&mut line, a.packet_id.get(), a.reason_code),
        Packet::PubRec(a) => ack(&mut line, a.packet_id.get(), a.reason_code),
        Packet::PubRel(a) => ack(&mut line, a.packet_id.get(), a.reason_code),
        Packet::PubComp(a) => ack(&mut line, a.packet_id.get(), a.reason_code),
        Packet::Subscribe(s) => {
            let _ = write!(line, " id={}", s.packet_id.get());
            for (filter, options) in &s.filters {
                let _ = write!(line, " {}@{}", filter.as_str(), options.qos as u8);
            }
        }
        Packet::SubAck(a) => reasons(&mut line, a.packet_id.get(), &a.reason_codes),
        Packet::Unsubscribe(u) => {
            let _ = write!(line, " id={}", u.packet_id.get());
            for filter in &u.filters {
                let _ = write!(line, " {}", filter.as_str());
            }
        }
        Packet::UnsubAck(a) => reasons(&mut line, a.packet_id.get(), &a.reason_codes),
        Packet::Disconnect(d) => {
            let _ = write!(line, " reason={}", d.reason_code.name());
        }
        Packet::Auth(a) => {
            let _ = write!(line, " reason={}", a.reason_code.name());
        }
        _ => {}
    }
    line
}

/// A CONNECT's fields.
fn connect_line(
    line: &mut String,
    client_id: &str,
    (clean_start, keep_alive): (bool, u16),
    username: Option<&str>,
    will_topic: Option<&str>,
) {
    let _ = write!(
        line,
        " client_id={client_id} clean_start={} keep_alive={keep_alive} username={} will={}",
        u8::from(clean_start),
        username.unwrap_or("-"),
        will_topic.unwrap_or("-"),
    );
}

fn ack(line: &mut String, id: u16, reason: codec::ReasonCode) {
    let _ = write!(line, " id={id} reason={}", reason.name());
}

fn reasons(line: &mut String, id: u16, reasons: &[codec::ReasonCode]) {
    let _ = write!(line, " id={id}");
    for reason in reasons {
        let _ = write!(line, " {}", reason.name());
    }
}
