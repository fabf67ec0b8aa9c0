//! [`ConnectFrame`]: a CONNECT as a server receives it. Everything is validated while decoding
//! (as for [`Connect`]), but the client identifier, will topic and payload, user name and
//! password stay where they lie in the frame: the packet holds one handle on its frame instead
//! of one per field (each an atomic reference-count update, most of the cost of decoding a
//! CONNECT), and a server that keeps these values copies them out of the frame once
//! ([`ConnectFrame::to_detached`]) instead of copying handles that it would then copy again.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

use super::connect::{
    CLEAN_START, PASSWORD, USERNAME, WILL, WILL_QOS_SHIFT, WILL_RETAIN, check_flags, read_protocol,
    rejects_empty_client_id,
};
use super::{Connect, PacketType, Will, Wire};
use crate::properties::{ConnectProperties, WillProperties, decode_properties_into};
use crate::read::Reader;
use crate::string::MqttStr;
use crate::{DecodeError, EncodeError, ProtocolVersion, QoS};

/// A received CONNECT: its fixed fields and properties decoded, its strings and binary fields
/// ranges of the frame.
#[derive(Clone)]
pub struct ConnectFrame {
    /// The body after the fixed header.
    frame: Bytes,
    /// Protocol version requested (from the protocol name and level).
    pub protocol: ProtocolVersion,
    /// Clean Start (5.0) / Clean Session (3.1.1).
    pub clean_start: bool,
    /// Keep Alive in seconds (0: disabled).
    pub keep_alive: u16,
    /// CONNECT properties (5.0; empty for 3.x).
    pub properties: ConnectProperties,
    client_id: Range<usize>,
    will: Option<WillFrame>,
    username: Option<Range<usize>>,
    password: Option<Range<usize>>,
}

#[derive(Clone)]
struct WillFrame {
    topic: Range<usize>,
    payload: Range<usize>,
    qos: QoS,
    retain: bool,
    properties: WillProperties,
}

impl ConnectFrame {
    /// The Client Identifier (may be empty where the protocol allows it).
    pub fn client_id(&self) -> &str {
        self.str_at(&self.client_id)
    }

    /// The User Name, if any.
    pub fn username(&self) -> Option<&str> {
        self.username.as_ref().map(|range| self.str_at(range))
    }

    /// The Will Topic, if a will is set.
    pub fn will_topic(&self) -> Option<&str> {
        self.will.as_ref().map(|will| self.str_at(&will.topic))
    }

    /// The CONNECT with every value in an allocation of its own: what a server keeps (a client
    /// id, a will, a user name) must not pin the receive buffer the frame is part of. The
    /// properties are as decoded.
    pub fn to_detached(&self) -> Connect {
        self.build(Bytes::copy_from_slice, true)
    }

    /// The CONNECT sharing the frame (a handle per value).
    pub fn to_connect(&self) -> Connect {
        self.build(|bytes| self.frame.slice_ref(bytes), false)
    }

    /// The CONNECT with each value made by `value`, and the properties copied out of the frame
    /// if `detach`.
    fn build(&self, value: impl Fn(&[u8]) -> Bytes, detach: bool) -> Connect {
        let text =
            |range: &Range<usize>| MqttStr::from_validated(value(&self.frame[range.clone()]));
        Connect {
            protocol: self.protocol,
            clean_start: self.clean_start,
            keep_alive: self.keep_alive,
            client_id: text(&self.client_id),
            will: self.will.as_ref().map(|will| Will {
                topic: text(&will.topic),
                payload: value(&self.frame[will.payload.clone()]),
                qos: will.qos,
                retain: will.retain,
                properties: if detach {
                    will.properties.detached()
                } else {
                    will.properties.clone()
                },
            }),
            username: self.username.as_ref().map(text),
            password: self
                .password
                .as_ref()
                .map(|range| value(&self.frame[range.clone()])),
            properties: if detach {
                self.properties.detached()
            } else {
                self.properties.clone()
            },
        }
    }

    /// A string field, validated while decoding. This checks UTF-8 again (a fast scan; the
    /// crate forbids `unsafe`, so the unchecked conversion is not available).
    fn str_at(&self, range: &Range<usize>) -> &str {
        std::str::from_utf8(&self.frame[range.clone()])
            .expect("invariant: string fields were validated as UTF-8 while decoding")
    }
}

impl PartialEq for ConnectFrame {
    /// Equal when the CONNECTs are (not only the frames: those of equal packets can differ).
    fn eq(&self, other: &Self) -> bool {
        self.to_connect() == other.to_connect()
    }
}

impl Eq for ConnectFrame {}

impl std::fmt::Debug for ConnectFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ConnectFrame")
            .field(&self.to_connect())
            .finish()
    }
}

/// A string field's range: its length read, the string validated where it lies.
fn string_range(body: &mut Reader, field: &'static str) -> Result<Range<usize>, DecodeError> {
    let start = body.position() + 2;
    let len = body.string_in_place(field)? - 2;
    Ok(start..start + len)
}

/// A Binary Data field's range.
fn binary_range(body: &mut Reader, field: &'static str) -> Result<Range<usize>, DecodeError> {
    let start = body.position() + 2;
    let len = body.binary_in_place(field)?.len();
    Ok(start..start + len)
}

/// Decodes a CONNECT body into a box allocated once the fixed part is read, filled in place.
pub(crate) fn decode_frame(body: Reader) -> Result<Box<ConnectFrame>, DecodeError> {
    let mut body = body.keeping_whole();
    let protocol = read_protocol(&mut body)?;
    let flags = body.u8("connect flags")?;
    check_flags(flags, protocol)?;
    let keep_alive = body.u16("keep alive")?;
    // Allocated first and written in place (`Box::new` would build it on the stack first).
    let mut connect = Box::write(
        Box::<ConnectFrame>::new_uninit(),
        ConnectFrame {
            frame: Bytes::new(),
            protocol,
            clean_start: flags & CLEAN_START != 0,
            keep_alive,
            properties: ConnectProperties::default(),
            client_id: 0..0,
            will: None,
            username: None,
            password: None,
        },
    );
    read_fields(&mut body, flags, &mut connect)?;
    if !body.is_empty() {
        return Err(DecodeError::TrailingBytes {
            packet: PacketType::Connect,
            extra: body.remaining(),
        });
    }
    connect.frame = body.into_buffer().0;
    Ok(connect)
}

/// Reads what follows Keep Alive (properties and payload) into `connect`.
fn read_fields(
    body: &mut Reader,
    flags: u8,
    connect: &mut ConnectFrame,
) -> Result<(), DecodeError> {
    let protocol = connect.protocol;
    if protocol.is_v5() {
        decode_properties_into(body, &mut connect.properties, "CONNECT")?;
    }
    connect.client_id = string_range(body, "client identifier")?;
    let clean_start = connect.clean_start;
    if connect.client_id.is_empty() && rejects_empty_client_id(protocol, clean_start) {
        return Err(DecodeError::ClientIdRejected {
            protocol,
            clean_start,
        });
    }
    if flags & WILL != 0 {
        connect.will = Some(read_will(body, protocol, flags)?);
    }
    if flags & USERNAME != 0 {
        connect.username = Some(string_range(body, "user name")?);
    }
    if flags & PASSWORD != 0 {
        connect.password = Some(binary_range(body, "password")?);
    }
    Ok(())
}

fn read_will(
    body: &mut Reader,
    protocol: ProtocolVersion,
    flags: u8,
) -> Result<WillFrame, DecodeError> {
    let qos = QoS::from_u8((flags >> WILL_QOS_SHIFT) & 0b11)
        .ok_or(DecodeError::InvalidQoS { field: "will QoS" })?;
    let mut properties = WillProperties::default();
    if protocol.is_v5() {
        decode_properties_into(body, &mut properties, "will")?;
    }
    let field = "will topic";
    let start = body.position() + 2;
    let len = usize::from(body.topic_name_in_place(field)?);
    if len == 0 {
        return Err(DecodeError::EmptyTopicName { field });
    }
    Ok(WillFrame {
        topic: start..start + len,
        payload: binary_range(body, "will payload")?,
        qos,
        retain: flags & WILL_RETAIN != 0,
        properties,
    })
}

impl Wire for ConnectFrame {
    const TYPE: PacketType = PacketType::Connect;
    type Plan = ();

    fn decode(_: u8, body: Reader, _: ProtocolVersion) -> Result<Self, DecodeError> {
        decode_frame(body).map(|connect| *connect)
    }

    fn measure(&self, _: ProtocolVersion) -> Result<(usize, ()), EncodeError> {
        Ok((self.frame.len(), ()))
    }

    fn write(&self, _: ProtocolVersion, _: &(), buf: &mut BytesMut) {
        buf.put_slice(&self.frame);
    }
}

#[cfg(test)]
#[path = "connect_frame_tests.rs"]
mod tests;
