//! MQTT over a [`Link`]: framing received bytes into packets, writing packets, and the
//! CONNECT/CONNACK exchange (with mosquitto's bridge marker for 3.1.1 remotes).

use std::io::ErrorKind;

use bytes::{Bytes, BytesMut};
use codec::{ConnAck, Connect, Limits, MqttStr, Packet, ProtocolVersion, ReasonCode};

use super::error::BridgeError;
use super::link::{LinkReader, LinkWriter};

/// The bit mosquitto's bridges set in CONNECT's protocol level ("try_private"): the remote
/// then treats the client as a bridge (no echo of its own messages, RETAIN kept as published).
const BRIDGE_MARKER: u8 = 0x80;

/// Received bytes turned into packets.
pub(crate) struct Framed {
    reader: LinkReader,
    buf: BytesMut,
    limits: Limits,
}

impl Framed {
    pub(crate) fn new(reader: LinkReader, protocol: ProtocolVersion) -> Self {
        Self {
            reader,
            buf: BytesMut::new(),
            limits: Limits::new(protocol),
        }
    }

    /// The next packet; an error when the peer closed, the read timed out or the bytes are
    /// not MQTT.
    pub(crate) fn next_packet(&mut self) -> Result<Packet, BridgeError> {
        loop {
            match codec::decode(&mut self.buf, &self.limits) {
                Ok(Some(packet)) => return Ok(packet),
                Ok(None) => {}
                Err(e) => return Err(BridgeError::Protocol(format!("malformed packet: {e}"))),
            }
            match self.reader.read_into(&mut self.buf) {
                Ok(0) => return Err(BridgeError::Closed),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(BridgeError::Timeout);
                }
                Err(e) => return Err(BridgeError::Io(e)),
            }
        }
    }
}

/// Encodes and writes one packet.
pub(crate) fn send(
    writer: &mut LinkWriter,
    protocol: ProtocolVersion,
    packet: &Packet,
) -> Result<(), BridgeError> {
    let mut out = BytesMut::new();
    codec::encode(packet, protocol, &mut out)
        .map_err(|e| BridgeError::Protocol(format!("encoding {:?}: {e}", packet.packet_type())))?;
    writer.write_all(&out)?;
    Ok(())
}

/// Sends `connect` (with the bridge marker when `marker`) and waits for the CONNACK; a refusal
/// is an error carrying its reason code.
pub(crate) fn handshake(
    writer: &mut LinkWriter,
    framed: &mut Framed,
    connect: Connect,
    marker: bool,
) -> Result<ConnAck, BridgeError> {
    let protocol = connect.protocol;
    let mut out = BytesMut::new();
    codec::encode(&Packet::from(connect), protocol, &mut out)
        .map_err(|e| BridgeError::Protocol(format!("encoding CONNECT: {e}")))?;
    if marker {
        mark_bridge(&mut out);
    }
    writer.write_all(&out)?;
    match framed.next_packet()? {
        Packet::ConnAck(connack) if connack.reason_code == ReasonCode::Success => Ok(*connack),
        Packet::ConnAck(connack) => Err(BridgeError::Refused(connack.reason_code)),
        other => Err(BridgeError::Protocol(format!(
            "expected CONNACK, got {:?}",
            other.packet_type()
        ))),
    }
}

/// Sets the bridge bit in an encoded CONNECT's protocol level: the byte after the fixed header
/// (type byte, remaining length) and the protocol name (2-byte length + "MQTT").
fn mark_bridge(frame: &mut [u8]) {
    let length_bytes = frame[1..]
        .iter()
        .position(|byte| byte & 0x80 == 0)
        .map_or(0, |last| last + 1);
    let level = 1 + length_bytes + 6;
    if let Some(byte) = frame.get_mut(level) {
        *byte |= BRIDGE_MARKER;
    }
}

/// An MQTT string from configured text (validated when the config was).
pub(crate) fn mqtt_str(text: &str) -> Result<MqttStr, BridgeError> {
    MqttStr::from_bytes(Bytes::copy_from_slice(text.as_bytes()))
        .map_err(|e| BridgeError::Protocol(format!("{text:?} is not an MQTT string: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use codec::ConnectProperties;

    #[test]
    fn the_bridge_marker_sets_the_high_bit_of_the_protocol_level() {
        for client_id in ["edge", &"x".repeat(200)] {
            let connect = Connect {
                protocol: ProtocolVersion::V3_1_1,
                clean_start: true,
                keep_alive: 60,
                client_id: mqtt_str(client_id).unwrap(),
                will: None,
                username: None,
                password: None,
                properties: ConnectProperties::default(),
            };
            let mut out = BytesMut::new();
            codec::encode(&Packet::from(connect), ProtocolVersion::V3_1_1, &mut out).unwrap();
            let plain = out.to_vec();
            mark_bridge(&mut out);
            let changed: Vec<usize> = (0..out.len()).filter(|&i| out[i] != plain[i]).collect();
            assert_eq!(changed.len(), 1, "one byte changes");
            assert_eq!(out[changed[0]], 0x84);
            assert_eq!(&out[changed[0] - 4..changed[0]], b"MQTT");
        }
    }
}
