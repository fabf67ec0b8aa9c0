//! The durable engines' value format: a small hand-written binary encoding of the stored types
//! (big-endian integers, `u32`-length-prefixed byte strings, a tag byte for options and enums),
//! each value starting with a format version byte. Decoding checks everything and fails with
//! [`Malformed`]; the engine turns that into [`StorageError::Corrupt`](super::StorageError)
//! naming the key.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use codec::{
    MqttStr, PacketId, PayloadFormat, ProtocolVersion, QoS, RetainHandling, SubscriptionId,
    SubscriptionOptions, Will, WillProperties,
};

use super::{StoredDelayed, StoredMessage, StoredOwner, StoredSession, StoredSubscription};
use crate::{InflightState, PendingWill, SessionExpiry};

/// The format version every value starts with (2: records without inflight ids, inflight
/// entries with their send number). A session record may end with its owner, a trailing field
/// added within version 3: a record without it (written before owners were stored) reads as
/// [`StoredOwner::Unbound`].
const VERSION: u8 = 3;

/// The tags of a record's trailing owner field.
const OWNER_UNBOUND: u8 = 0;
const OWNER_ANONYMOUS: u8 = 1;
const OWNER_USER: u8 = 2;

/// The byte that leads a message's trailing key (after its optional acceptance time, whose
/// own first byte is 0 or 1).
const KEY_TAG: u8 = 2;

/// A value that does not decode.
#[derive(Debug)]
pub(in crate::storage) struct Malformed;

pub(in crate::storage) type Decoded<T> = Result<T, Malformed>;

/// Appends the encoding of values to a buffer.
pub(in crate::storage) struct Writer(Vec<u8>);

impl Writer {
    pub(in crate::storage) fn new() -> Self {
        Self(vec![VERSION])
    }
    /// The encoded value.
    pub(in crate::storage) fn into_inner(self) -> Vec<u8> {
        self.0
    }
    /// A writer with room for `len` bytes after the version (one allocation for a value
    /// whose size is known).
    fn with_capacity(len: usize) -> Self {
        let mut buf = Vec::with_capacity(1 + len);
        buf.push(VERSION);
        Self(buf)
    }
    pub(in crate::storage) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(in crate::storage) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(in crate::storage) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn packet_id(&mut self, id: PacketId) {
        self.0.extend_from_slice(&id.get().to_be_bytes());
    }
    pub(in crate::storage) fn bytes(&mut self, v: &[u8]) {
        // Values come from MQTT packets, far below 4 GiB.
        self.u32(u32::try_from(v.len()).expect("invariant: an MQTT value fits a u32 length"));
        self.0.extend_from_slice(v);
    }
    fn opt<T>(&mut self, v: Option<&T>, f: impl FnOnce(&mut Self, &T)) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                f(self, v);
            }
        }
    }
    fn duration(&mut self, d: Duration) {
        self.u64(d.as_secs());
        self.u32(d.subsec_nanos());
    }
    fn time(&mut self, t: SystemTime) {
        match t.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(after) => {
                self.u8(0);
                self.duration(after);
            }
            Err(before) => {
                self.u8(1);
                self.duration(before.duration());
            }
        }
    }
}

/// Reads values back, checking each.
pub(in crate::storage) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub(in crate::storage) fn new(value: &'a [u8]) -> Decoded<Self> {
        match value.split_first() {
            Some((&VERSION, rest)) => Ok(Self(rest)),
            _ => Err(Malformed),
        }
    }
    fn take(&mut self, n: usize) -> Decoded<&'a [u8]> {
        if self.0.len() < n {
            return Err(Malformed);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Decoded<[u8; N]> {
        self.take(N)?.try_into().map_err(|_| Malformed)
    }
    pub(in crate::storage) fn u8(&mut self) -> Decoded<u8> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Decoded<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub(in crate::storage) fn u32(&mut self) -> Decoded<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub(in crate::storage) fn u64(&mut self) -> Decoded<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    fn bool(&mut self) -> Decoded<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Malformed),
        }
    }
    pub(in crate::storage) fn bytes(&mut self) -> Decoded<Bytes> {
        let len = usize::try_from(self.u32()?).map_err(|_| Malformed)?;
        Ok(Bytes::copy_from_slice(self.take(len)?))
    }
    pub(in crate::storage) fn text(&mut self) -> Decoded<MqttStr> {
        MqttStr::from_bytes(self.bytes()?).map_err(|_| Malformed)
    }
    fn opt<T>(&mut self, f: impl FnOnce(&mut Self) -> Decoded<T>) -> Decoded<Option<T>> {
        if self.bool()? {
            f(self).map(Some)
        } else {
            Ok(None)
        }
    }
    pub(in crate::storage) fn vec<T>(
        &mut self,
        mut f: impl FnMut(&mut Self) -> Decoded<T>,
    ) -> Decoded<Vec<T>> {
        let len = self.u32()?;
        // No pre-allocation from an untrusted length.
        (0..len).map(|_| f(self)).collect()
    }
    pub(in crate::storage) fn packet_id(&mut self) -> Decoded<PacketId> {
        PacketId::new(self.u16()?).ok_or(Malformed)
    }
    fn qos(&mut self) -> Decoded<QoS> {
        QoS::from_u8(self.u8()?).ok_or(Malformed)
    }
    fn sub_id(&mut self) -> Decoded<SubscriptionId> {
        SubscriptionId::new(self.u32()?).ok_or(Malformed)
    }
    fn duration(&mut self) -> Decoded<Duration> {
        let secs = self.u64()?;
        let nanos = self.u32()?;
        if nanos >= 1_000_000_000 {
            return Err(Malformed);
        }
        Ok(Duration::new(secs, nanos))
    }
    fn time(&mut self) -> Decoded<SystemTime> {
        let before = self.bool()?;
        let d = self.duration()?;
        let t = if before {
            SystemTime::UNIX_EPOCH.checked_sub(d)
        } else {
            SystemTime::UNIX_EPOCH.checked_add(d)
        };
        t.ok_or(Malformed)
    }
    /// The next byte, not read (`None` at the end: an optional trailing field is absent).
    fn peek(&self) -> Option<u8> {
        self.0.first().copied()
    }
    pub(in crate::storage) fn finish<T>(self, value: T) -> Decoded<T> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(Malformed)
        }
    }
}

pub(in crate::storage) fn len_u32(n: usize) -> u32 {
    u32::try_from(n).expect("invariant: a stored list is shorter than 2^32")
}

/// A session's own record: everything but its queued and inflight messages (stored under their
/// own keys), its owner last.
pub(in crate::storage) fn encode_record(s: &StoredSession) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(s.protocol.level());
    match s.expiry {
        SessionExpiry::OnClose => w.u8(0),
        SessionExpiry::After(secs) => {
            w.u8(1);
            w.u32(secs);
        }
        SessionExpiry::Never => w.u8(2),
    }
    w.opt(s.will.as_ref(), write_will);
    w.opt(s.disconnected_at.as_ref(), |w, t| w.time(*t));
    w.u32(len_u32(s.subscriptions.len()));
    for sub in &s.subscriptions {
        write_subscription(&mut w, sub);
    }
    // Inbound QoS 2 ids live under their own key, `p` (written once per batch that changes
    // them, not with every record rewrite): the record's list stays empty.
    w.u32(0);
    write_owner(&mut w, &s.owner);
    w.0
}

/// Decodes a record: the session without queue or inflight entries. A record that ends before
/// the owner (the format before owners were stored) is a session of owner
/// [`StoredOwner::Unbound`].
pub(in crate::storage) fn decode_record(
    client_id: MqttStr,
    value: &[u8],
) -> Decoded<StoredSession> {
    let mut r = Reader::new(value)?;
    let protocol = match r.u8()? {
        3 => ProtocolVersion::V3_1,
        4 => ProtocolVersion::V3_1_1,
        5 => ProtocolVersion::V5,
        _ => return Err(Malformed),
    };
    let expiry = match r.u8()? {
        0 => SessionExpiry::OnClose,
        1 => SessionExpiry::After(r.u32()?),
        2 => SessionExpiry::Never,
        _ => return Err(Malformed),
    };
    let will = r.opt(read_will)?;
    let mut session = StoredSession::new(client_id, protocol, expiry, will);
    session.disconnected_at = r.opt(Reader::time)?;
    session.subscriptions = r.vec(read_subscription)?;
    session.awaiting_release = r.vec(Reader::packet_id)?;
    if r.peek().is_some() {
        session.owner = read_owner(&mut r)?;
    }
    r.finish(session)
}

fn write_owner(w: &mut Writer, owner: &StoredOwner) {
    match owner {
        StoredOwner::Unbound => w.u8(OWNER_UNBOUND),
        StoredOwner::Anonymous => w.u8(OWNER_ANONYMOUS),
        StoredOwner::User(name) => {
            w.u8(OWNER_USER);
            w.bytes(name.as_bytes());
        }
    }
}

fn read_owner(r: &mut Reader<'_>) -> Decoded<StoredOwner> {
    match r.u8()? {
        OWNER_UNBOUND => Ok(StoredOwner::Unbound),
        OWNER_ANONYMOUS => Ok(StoredOwner::Anonymous),
        OWNER_USER => Ok(StoredOwner::User(r.text()?)),
        _ => Err(Malformed),
    }
}

fn write_will(w: &mut Writer, will: &PendingWill) {
    let PendingWill { will, delay } = will;
    w.bytes(will.topic.as_bytes());
    w.bytes(&will.payload);
    w.u8(will.qos.as_u8());
    w.u8(u8::from(will.retain));
    w.duration(*delay);
    let p = &will.properties;
    w.opt(p.will_delay_interval.as_ref(), |w, v| w.u32(*v));
    w.opt(p.payload_format.as_ref(), |w, f| w.u8(*f as u8));
    w.opt(p.message_expiry_interval.as_ref(), |w, v| w.u32(*v));
    w.opt(p.content_type.as_ref(), |w, v| w.bytes(v.as_bytes()));
    w.opt(p.response_topic.as_ref(), |w, v| w.bytes(v.as_bytes()));
    w.opt(p.correlation_data.as_ref(), |w, v| w.bytes(v));
    w.u32(len_u32(p.user_properties.len()));
    for (name, value) in &p.user_properties {
        w.bytes(name.as_bytes());
        w.bytes(value.as_bytes());
    }
}

fn read_will(r: &mut Reader<'_>) -> Decoded<PendingWill> {
    let topic = r.text()?;
    let payload = r.bytes()?;
    let qos = r.qos()?;
    let retain = r.bool()?;
    let delay = r.duration()?;
    let properties = WillProperties {
        will_delay_interval: r.opt(Reader::u32)?,
        payload_format: r.opt(|r| match r.u8()? {
            0 => Ok(PayloadFormat::Unspecified),
            1 => Ok(PayloadFormat::Utf8),
            _ => Err(Malformed),
        })?,
        message_expiry_interval: r.opt(Reader::u32)?,
        content_type: r.opt(Reader::text)?,
        response_topic: r.opt(Reader::text)?,
        correlation_data: r.opt(Reader::bytes)?,
        user_properties: r.vec(|r| Ok((r.text()?, r.text()?)))?,
    };
    let will = Will {
        topic,
        payload,
        qos,
        retain,
        properties,
    };
    Ok(PendingWill { will, delay })
}

fn write_subscription(w: &mut Writer, sub: &StoredSubscription) {
    w.bytes(sub.filter.as_bytes());
    let o = &sub.options;
    w.u8(o.qos.as_u8());
    w.u8(u8::from(o.no_local));
    w.u8(u8::from(o.retain_as_published));
    w.u8(o.retain_handling as u8);
    w.opt(sub.id.as_ref(), |w, id| w.u32(id.get()));
}

fn read_subscription(r: &mut Reader<'_>) -> Decoded<StoredSubscription> {
    let filter = r.text()?;
    let options = SubscriptionOptions {
        qos: r.qos()?,
        no_local: r.bool()?,
        retain_as_published: r.bool()?,
        retain_handling: RetainHandling::from_u8(r.u8()?).ok_or(Malformed)?,
    };
    let id = r.opt(Reader::sub_id)?;
    Ok(StoredSubscription {
        filter,
        options,
        id,
    })
}

fn write_message(w: &mut Writer, m: &StoredMessage) {
    w.bytes(&m.topic);
    w.bytes(&m.payload);
    w.u8(m.qos.as_u8());
    w.u8(u8::from(m.retain));
    w.bytes(&m.properties);
    w.opt(m.expires_at.as_ref(), |w, t| w.time(*t));
    w.u32(len_u32(m.sub_ids.len()));
    for id in &m.sub_ids {
        w.u32(id.get());
    }
    // Trailing fields, each written only when set, so every other value encodes as before:
    // the acceptance time (led by its own sign byte, 0 or 1), then the key (led by KEY_TAG).
    if let Some(at) = m.accepted_at {
        w.time(at);
    }
    if m.key != 0 {
        w.u8(KEY_TAG);
        w.u64(m.key);
    }
}

fn read_message(r: &mut Reader<'_>) -> Decoded<StoredMessage> {
    Ok(StoredMessage {
        topic: r.bytes()?,
        payload: r.bytes()?,
        qos: r.qos()?,
        retain: r.bool()?,
        properties: r.bytes()?,
        expires_at: r.opt(Reader::time)?,
        sub_ids: r.vec(Reader::sub_id)?,
        accepted_at: match r.peek() {
            Some(0 | 1) => Some(r.time()?),
            _ => None,
        },
        key: match r.peek() {
            Some(KEY_TAG) => {
                r.u8()?;
                r.u64()?
            }
            _ => 0,
        },
    })
}

/// An upper bound of a message's encoded size (after the version byte).
fn message_len(m: &StoredMessage) -> usize {
    // Three length-prefixed byte strings, QoS, RETAIN, an optional time, the sub-id count and
    // ids, the optional acceptance time and the optional key.
    3 * 4
        + m.topic.len()
        + m.payload.len()
        + m.properties.len()
        + 2
        + 16
        + 4
        + 4 * m.sub_ids.len()
        + 16
        + 9
}

pub(in crate::storage) fn encode_message(m: &StoredMessage) -> Vec<u8> {
    let mut w = Writer::with_capacity(message_len(m));
    write_message(&mut w, m);
    w.0
}

/// A delayed message: when due, its publisher, then the message.
pub(in crate::storage) fn encode_delayed(d: &StoredDelayed) -> Vec<u8> {
    let mut w =
        Writer::with_capacity(16 + 4 + d.publisher.as_bytes().len() + message_len(&d.message));
    w.time(d.due);
    w.bytes(d.publisher.as_bytes());
    write_message(&mut w, &d.message);
    w.0
}

/// Decodes a delayed message.
pub(in crate::storage) fn decode_delayed(value: &[u8]) -> Decoded<StoredDelayed> {
    let mut r = Reader::new(value)?;
    let d = StoredDelayed {
        due: r.time()?,
        publisher: r.text()?,
        message: read_message(&mut r)?,
    };
    r.finish(d)
}

/// Decodes a queued message.
pub(in crate::storage) fn decode_message(value: &[u8]) -> Decoded<StoredMessage> {
    let mut r = Reader::new(value)?;
    let m = read_message(&mut r)?;
    r.finish(m)
}

/// A session's inbound QoS 2 ids awaiting PUBREL, in order.
pub(in crate::storage) fn encode_awaiting_ids(ids: &[PacketId]) -> Vec<u8> {
    let mut w = Writer::with_capacity(4 + 2 * ids.len());
    w.u32(len_u32(ids.len()));
    for &id in ids {
        w.packet_id(id);
    }
    w.0
}

/// Decodes a session's inbound QoS 2 ids awaiting PUBREL.
pub(in crate::storage) fn decode_awaiting_ids(value: &[u8]) -> Decoded<Vec<PacketId>> {
    let mut r = Reader::new(value)?;
    let ids = r.vec(Reader::packet_id)?;
    r.finish(ids)
}

/// An inflight entry: its send number and state.
pub(in crate::storage) fn encode_inflight(
    send: u64,
    state: &InflightState<&StoredMessage>,
) -> Vec<u8> {
    let mut w = match state {
        InflightState::AwaitingPubAck(m) | InflightState::AwaitingPubRec(m) => {
            Writer::with_capacity(9 + message_len(m))
        }
        InflightState::AwaitingPubComp => Writer::with_capacity(9),
    };
    w.u64(send);
    match state {
        InflightState::AwaitingPubAck(m) => {
            w.u8(0);
            write_message(&mut w, m);
        }
        InflightState::AwaitingPubRec(m) => {
            w.u8(1);
            write_message(&mut w, m);
        }
        InflightState::AwaitingPubComp => w.u8(2),
    }
    w.0
}

/// Decodes an inflight entry: its send number and state.
pub(in crate::storage) fn decode_inflight(
    value: &[u8],
) -> Decoded<(u64, InflightState<StoredMessage>)> {
    let mut r = Reader::new(value)?;
    let send = r.u64()?;
    let state = match r.u8()? {
        0 => InflightState::AwaitingPubAck(read_message(&mut r)?),
        1 => InflightState::AwaitingPubRec(read_message(&mut r)?),
        2 => InflightState::AwaitingPubComp,
        _ => return Err(Malformed),
    };
    r.finish((send, state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::contract_writes::{record_without_owner, session_without_owner, text};

    #[test]
    fn a_record_written_before_owners_were_stored_reads_as_unbound() {
        let decoded = decode_record(text("old"), &record_without_owner()).unwrap();
        assert_eq!(decoded, session_without_owner());
        assert_eq!(decoded.owner, StoredOwner::Unbound);
    }

    #[test]
    fn the_owner_is_the_records_trailing_field() {
        let encoded = encode_record(&session_without_owner());
        assert_eq!(
            encoded,
            [record_without_owner(), vec![OWNER_UNBOUND]].concat()
        );
    }

    #[test]
    fn every_owner_round_trips() {
        for owner in [
            StoredOwner::Unbound,
            StoredOwner::Anonymous,
            StoredOwner::User(text("alice")),
        ] {
            let mut session = session_without_owner();
            session.owner = owner;
            let back = decode_record(text("old"), &encode_record(&session)).unwrap();
            assert_eq!(back, session);
        }
    }

    #[test]
    fn an_unknown_or_cut_owner_is_malformed() {
        let unknown = [record_without_owner(), vec![OWNER_USER + 1]].concat();
        assert!(decode_record(text("old"), &unknown).is_err());
        let mut session = session_without_owner();
        session.owner = StoredOwner::User(text("alice"));
        let encoded = encode_record(&session);
        let cut = &encoded[..encoded.len() - 1];
        assert!(decode_record(text("old"), cut).is_err());
    }

    #[test]
    fn a_retained_messages_acceptance_time_is_a_trailing_field_written_only_when_set() {
        let without = crate::storage::contract_writes::message("r/t", QoS::AtLeastOnce);
        let old_layout = encode_message(&without);
        assert_eq!(decode_message(&old_layout).unwrap(), without);
        let accepted = StoredMessage {
            accepted_at: Some(SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123)),
            ..without
        };
        let encoded = encode_message(&accepted);
        assert!(encoded.starts_with(&old_layout));
        assert_eq!(decode_message(&encoded).unwrap(), accepted);
        assert!(decode_message(&encoded[..encoded.len() - 1]).is_err());
    }

    #[test]
    fn a_messages_key_is_a_trailing_field_after_the_acceptance_time_written_only_when_set() {
        let without = crate::storage::contract_writes::message("t", QoS::ExactlyOnce);
        let old_layout = encode_message(&without);
        let keyed = StoredMessage {
            key: 0x0123_4567_89ab_cdef,
            ..without.clone()
        };
        let encoded = encode_message(&keyed);
        assert_eq!(encoded.len(), old_layout.len() + 9);
        assert!(encoded.starts_with(&old_layout));
        assert_eq!(decode_message(&encoded).unwrap(), keyed);
        let both = StoredMessage {
            accepted_at: Some(SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123)),
            ..keyed
        };
        let encoded = encode_message(&both);
        assert_eq!(decode_message(&encoded).unwrap(), both);
        assert!(decode_message(&encoded[..encoded.len() - 1]).is_err());
        let unknown_trailer = [old_layout, vec![KEY_TAG + 1]].concat();
        assert!(decode_message(&unknown_trailer).is_err());
    }
}
