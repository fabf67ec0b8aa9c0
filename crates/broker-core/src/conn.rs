//! Per-connection protocol state, owned by the shard that accepted the socket, and the table
//! that holds it.
//!
//! An idle connection costs its record (64 bytes with the table's generation, inline in
//! [`Connections`]) and nothing else: the partial-frame buffer and the topic-alias tables are
//! allocated only while in use, the peer address is logged once at accept instead of kept (but
//! the `[ip]` guard's mark: an IPv4 address in the record), and the client id lives in the
//! session (the record names the session by its subscriber key).

use std::num::NonZeroU64;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use codec::ProtocolVersion;
use ring_runtime::{ConnId, ConnMap};
use router::SubscriberId;

use crate::alias::{AliasError, InboundAliases, OutboundAliases};
use crate::guard::DoorMark;
use crate::message::PRE_CONNECT_PROTOCOL;
use session_store::ByteBudget;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Accepted; its CONNECT has not arrived.
    AwaitingConnect,
    /// CONNECT received; its credentials wait for the authentication backends (the CONNECT
    /// waits in the shard's `logins`; see `shard/login.rs`).
    AwaitingAuth,
    /// CONNECT received with an Authentication Method: the AUTH exchange runs (the CONNECT
    /// waits in the shard's `exchanges`; see `shard/auth_exchange.rs`). Only AUTH and
    /// DISCONNECT are read; the CONNECT timeout and `limits.max_connect_size` still apply.
    Authenticating,
    /// CONNECT received; waiting for another shard to hand over the session (the CONNECT waits
    /// in the shard's `claims` table).
    AwaitingSession,
    /// CONNACK sent; packets flow.
    Connected,
    /// Connected, but its packets wait for a SUBSCRIBE or UNSUBSCRIBE of its own to take effect
    /// on every shard (what it sends meanwhile is kept in the carry; see `shard/gate.rs`), for
    /// acknowledgements held for the disk (`shard/durable.rs`) or for its publish rate
    /// (`shard/throttle.rs`).
    AwaitingAck,
    /// Closing: nothing more is read from it.
    Closing,
}

/// One client connection.
#[derive(Debug)]
pub struct Connection {
    /// Its phase.
    pub phase: Phase,
    /// Its protocol version (3.1.1 wire rules until CONNECT says otherwise).
    pub protocol: ProtocolVersion,
    /// Bytes of an incomplete frame, kept (boxed) only while a frame is partial.
    carry: Option<Box<BytesMut>>,
    /// The session it is attached to once connected, by subscriber key (keys start at 1, so
    /// the niche keeps this at 8 bytes; see [`Self::session`]).
    session: Option<NonZeroU64>,
    /// Keep-alive in seconds as agreed in CONNECT/CONNACK (0: disabled).
    pub keep_alive: u16,
    /// In nanoseconds since the broker started: when it was accepted until its CONNACK, then
    /// when a packet last arrived (see [`Self::deadline`]).
    last_activity: u64,
    /// Our Topic Alias Maximum for this client (0 for 3.x clients).
    inbound_alias_max: u16,
    /// Topic aliases in both directions: allocated at CONNECT when the client accepts aliases
    /// from us, otherwise at the client's first alias (most clients never use any).
    aliases: Option<Box<TopicAliases>>,
    /// Largest packet the client accepts.
    pub client_max_packet: u32,
    /// When its CONNECT was accepted, in whole seconds since the broker started (for the
    /// admin API; 4 bytes that fit the record's padding).
    pub connected_at_s: u32,
    /// Whether the will is published when this connection ends (false after a normal
    /// DISCONNECT).
    pub publish_will: bool,
    /// Whether it completed CONNECT (and so counts in `$SYS/broker/clients/connected` until it
    /// closes).
    pub counted: bool,
    /// What the `[ip]` guard gave it at accept: its client's address (IPv4 here), whether it
    /// counts against that address's connections.
    door: DoorMark,
}

/// A partial frame that did not fit in the broker's partial-frame budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    /// The bytes it would have held.
    pub bytes: u64,
}

/// The topic aliases of one connection.
#[derive(Debug)]
struct TopicAliases {
    inbound: InboundAliases,
    outbound: Option<OutboundAliases>,
}

impl Connection {
    /// The session it is attached to, by subscriber key.
    pub fn session(&self) -> Option<SubscriberId> {
        self.session.map(|key| SubscriberId(key.get()))
    }

    /// Attaches the connection to the session with key `subscriber`.
    pub fn attach(&mut self, subscriber: SubscriberId) {
        let key = NonZeroU64::new(subscriber.0);
        self.session = Some(key.expect("invariant: subscriber keys start at 1"));
    }

    /// Detaches the connection from its session.
    pub fn detach(&mut self) {
        self.session = None;
    }

    /// A freshly accepted connection; `since_start` is the time since the broker started.
    pub fn new(since_start: Duration) -> Self {
        Self {
            phase: Phase::AwaitingConnect,
            protocol: PRE_CONNECT_PROTOCOL,
            carry: None,
            session: None,
            keep_alive: 0,
            last_activity: nanos(since_start),
            inbound_alias_max: 0,
            aliases: None,
            client_max_packet: u32::MAX,
            connected_at_s: 0,
            publish_will: true,
            counted: false,
            door: DoorMark::Unmarked,
        }
    }

    /// What the `[ip]` guard gave it at accept.
    pub fn door_mark(&self) -> DoorMark {
        self.door
    }

    /// Keeps what the `[ip]` guard gave it at accept.
    pub fn set_door_mark(&mut self, mark: DoorMark) {
        self.door = mark;
    }

    /// Whether packets other than CONNECT may be processed.
    pub fn is_connected(&self) -> bool {
        matches!(self.phase, Phase::Connected | Phase::AwaitingAck)
    }

    /// Whether its packets wait for an acknowledgement of its own (see [`Phase::AwaitingAck`]).
    pub fn is_parked(&self) -> bool {
        matches!(self.phase, Phase::AwaitingAck)
    }

    /// Holds its later packets until [`Self::unpark`] (a connected connection only).
    pub fn park(&mut self) {
        if self.phase == Phase::Connected {
            self.phase = Phase::AwaitingAck;
        }
    }

    /// Lets its packets flow again.
    pub fn unpark(&mut self) {
        if self.phase == Phase::AwaitingAck {
            self.phase = Phase::Connected;
        }
    }

    /// Records that a packet arrived `since_start` after the broker started (call it only once
    /// connected: before that, the time kept is the accept's, for the CONNECT timeout).
    pub fn touch(&mut self, since_start: Duration) {
        self.last_activity = nanos(since_start);
    }

    /// When this connection's time runs out, as an instant given the broker's start: before
    /// CONNACK, `connect_timeout` after it was accepted; once connected, its keep-alive
    /// ([`Self::keep_alive_deadline`]); never while closing.
    pub fn deadline(&self, started: Instant, connect_timeout: Duration) -> Option<Instant> {
        match self.phase {
            Phase::AwaitingConnect
            | Phase::Authenticating
            | Phase::AwaitingAuth
            | Phase::AwaitingSession => {
                Some(started + Duration::from_nanos(self.last_activity) + connect_timeout)
            }
            Phase::Connected | Phase::AwaitingAck => self.keep_alive_deadline(started),
            Phase::Closing => None,
        }
    }

    /// When the keep-alive runs out (1.5 x the keep-alive after the last packet), as an instant
    /// given the broker's start; `None` when keep-alive is disabled.
    pub fn keep_alive_deadline(&self, started: Instant) -> Option<Instant> {
        let grace = keep_alive_grace(self.keep_alive)?;
        Some(started + Duration::from_nanos(self.last_activity) + grace)
    }

    /// Takes the carried partial frame (empty when there is none), giving its bytes back to
    /// `budget`.
    pub fn take_carry(&mut self, budget: &ByteBudget) -> BytesMut {
        let carry = self.carry.take().map(|b| *b).unwrap_or_default();
        budget.release(carry.capacity() as u64);
        carry
    }

    /// Keeps `buf` as the carried partial frame, its allocation charged to `budget`; an empty
    /// one frees the carry. When the budget has no room, nothing is kept: `Err` with the bytes
    /// that did not fit.
    pub fn keep_carry(&mut self, buf: BytesMut, budget: &ByteBudget) -> Result<(), OverBudget> {
        self.discard_carry(budget);
        if buf.is_empty() {
            self.carry = None;
            return Ok(());
        }
        let bytes = buf.capacity() as u64;
        if !budget.try_charge(bytes) {
            return Err(OverBudget { bytes });
        }
        self.carry = Some(Box::new(buf));
        Ok(())
    }

    /// Drops the carried partial frame, if any, giving its bytes back to `budget`.
    pub fn discard_carry(&mut self, budget: &ByteBudget) {
        drop(self.take_carry(budget));
    }

    /// Whether a partial frame is carried.
    pub fn has_carry(&self) -> bool {
        self.carry.is_some()
    }

    /// Sets the Topic Alias Maximums from CONNECT: ours for the client (`inbound`) and the
    /// lower of the client's and our configured one (`outbound`; 0: no aliases to it). Aliases
    /// set before are forgotten.
    pub fn set_topic_alias_maximums(&mut self, inbound: u16, outbound: u16) {
        self.inbound_alias_max = inbound;
        self.aliases = (outbound > 0).then(|| {
            Box::new(TopicAliases {
                inbound: InboundAliases::new(inbound),
                outbound: Some(OutboundAliases::new(outbound)),
            })
        });
    }

    /// Resolves a PUBLISH's topic against the aliases the client set (see
    /// [`InboundAliases::resolve`]).
    pub fn resolve_topic_alias(&mut self, topic: &Bytes, alias: u16) -> Result<Bytes, AliasError> {
        let max = self.inbound_alias_max;
        let aliases = self.aliases.get_or_insert_with(|| {
            Box::new(TopicAliases {
                inbound: InboundAliases::new(max),
                outbound: None,
            })
        });
        aliases.inbound.resolve(topic, alias)
    }

    /// The aliases we use towards the client (`None` when it accepts none).
    pub fn outbound_aliases(&mut self) -> Option<&mut OutboundAliases> {
        self.aliases.as_mut()?.outbound.as_mut()
    }

    /// Whether we may use topic aliases towards the client.
    pub fn has_outbound_aliases(&self) -> bool {
        self.aliases.as_ref().is_some_and(|a| a.outbound.is_some())
    }
}

/// The keep-alive grace for a keep-alive in seconds: 1.5 x, `None` when disabled.
pub fn keep_alive_grace(keep_alive: u16) -> Option<Duration> {
    (keep_alive > 0).then(|| Duration::from_millis(u64::from(keep_alive) * 1500))
}

fn nanos(since_start: Duration) -> u64 {
    u64::try_from(since_start.as_nanos()).unwrap_or(u64::MAX)
}

/// The shard's connections: inline in the runtime's [`ConnMap`] (indexed by the dense
/// connection index, generation-checked), so no hashing and no allocation per connection on the
/// delivery path. Methods take `&ConnId` like a map's.
#[derive(Default)]
pub struct Connections {
    map: ConnMap<Connection>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("len", &self.map.len())
            .finish()
    }
}

impl Connections {
    /// Adds the record of connection `id`.
    pub fn insert(&mut self, id: ConnId, connection: Connection) {
        self.map.insert(id, connection);
    }

    /// The connection `id`, if open.
    pub fn get(&self, id: &ConnId) -> Option<&Connection> {
        self.map.get(*id)
    }

    /// The connection `id`, if open, for changes.
    pub fn get_mut(&mut self, id: &ConnId) -> Option<&mut Connection> {
        self.map.get_mut(*id)
    }

    /// Whether `id`'s CONNECT is in its AUTH exchange (MQTT 5 enhanced authentication).
    pub fn is_authenticating(&self, id: ConnId) -> bool {
        self.get(&id)
            .is_some_and(|c| c.phase == Phase::Authenticating)
    }

    /// Whether `id` is open.
    pub fn contains_key(&self, id: &ConnId) -> bool {
        self.map.get(*id).is_some()
    }

    /// Removes and returns the connection `id`.
    pub fn remove(&mut self, id: &ConnId) -> Option<Connection> {
        self.map.remove(*id)
    }

    /// Open connections.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether none are open.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every open connection with its id.
    pub fn iter(&self) -> impl Iterator<Item = (ConnId, &Connection)> {
        self.map.iter()
    }

    pub(super) fn mark_awaiting(&mut self, conn: ConnId) {
        if let Some(connection) = self.get_mut(&conn) {
            connection.phase = Phase::AwaitingSession;
        }
    }

    /// Whether `conn` is still open and waiting for a session; if so it stops waiting (its
    /// CONNECT is completed next).
    pub(super) fn stop_waiting(&mut self, conn: ConnId) -> bool {
        let Some(connection) = self.get_mut(&conn) else {
            return false;
        };
        let waiting = connection.phase == Phase::AwaitingSession;
        if waiting {
            connection.phase = Phase::AwaitingConnect;
        }
        waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(index: u32, generation: u32) -> ConnId {
        ConnId::from_u64(u64::from(generation) << 32 | u64::from(index))
    }

    #[test]
    fn a_stale_generation_never_reaches_the_new_occupant() {
        let mut conns = Connections::default();
        conns.insert(id(3, 0), Connection::new(Duration::ZERO));
        assert!(conns.get(&id(3, 0)).is_some());
        assert!(conns.remove(&id(3, 1)).is_none(), "other generation");
        assert!(conns.remove(&id(3, 0)).is_some());
        conns.insert(id(3, 1), Connection::new(Duration::ZERO));
        assert!(conns.get(&id(3, 0)).is_none());
        assert!(conns.get_mut(&id(3, 1)).is_some());
        assert!(!conns.contains_key(&id(9, 0)));
        assert_eq!(conns.len(), 1);
        assert_eq!(
            conns.iter().map(|(id, _)| id).collect::<Vec<_>>(),
            vec![id(3, 1)]
        );
        conns.remove(&id(3, 1));
        assert!(conns.is_empty());
    }

    #[test]
    fn an_empty_carry_holds_no_buffer() {
        let budget = ByteBudget::new(1 << 20);
        let mut connection = Connection::new(Duration::ZERO);
        connection.keep_carry(BytesMut::new(), &budget).unwrap();
        assert!(!connection.has_carry());
        connection
            .keep_carry(BytesMut::from(&b"partial"[..]), &budget)
            .unwrap();
        assert!(connection.has_carry());
        assert_eq!(budget.used(), 7);
        assert_eq!(&connection.take_carry(&budget)[..], b"partial");
        assert!(!connection.has_carry());
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_carry_over_the_budget_is_not_kept() {
        let budget = ByteBudget::new(10);
        let mut connection = Connection::new(Duration::ZERO);
        let refused = connection.keep_carry(BytesMut::from(&[0u8; 11][..]), &budget);
        assert_eq!(refused, Err(OverBudget { bytes: 11 }));
        assert!(!connection.has_carry());
        assert_eq!(budget.used(), 0);
        connection
            .keep_carry(BytesMut::from(&[0u8; 10][..]), &budget)
            .unwrap();
        connection.discard_carry(&budget);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn alias_tables_exist_only_when_used() {
        let mut connection = Connection::new(Duration::ZERO);
        connection.set_topic_alias_maximums(10, 0);
        assert!(connection.aliases.is_none());
        assert!(!connection.has_outbound_aliases());
        let topic = Bytes::from_static(b"a/b");
        assert_eq!(connection.resolve_topic_alias(&topic, 3), Ok(topic.clone()));
        assert_eq!(
            connection.resolve_topic_alias(&Bytes::new(), 3),
            Ok(topic.clone())
        );
        assert!(connection.resolve_topic_alias(&topic, 11).is_err());
        assert!(connection.outbound_aliases().is_none());
        connection.set_topic_alias_maximums(10, 5);
        assert!(connection.has_outbound_aliases());
        assert!(
            connection.resolve_topic_alias(&Bytes::new(), 3).is_err(),
            "a new CONNECT forgets the aliases set before"
        );
    }

    #[test]
    fn keep_alive_deadline_follows_the_last_packet() {
        let started = Instant::now();
        let mut connection = Connection::new(Duration::ZERO);
        assert_eq!(connection.keep_alive_deadline(started), None);
        connection.keep_alive = 10;
        connection.touch(Duration::from_secs(4));
        assert_eq!(
            connection.keep_alive_deadline(started),
            Some(started + Duration::from_secs(19))
        );
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_idle_connection_record_stays_small() {
        // 54 bytes (the guard's mark 6 of them), plus the generation the table keeps beside
        // it: one 64-byte slot.
        assert!(std::mem::size_of::<Option<(u32, Connection)>>() <= 64);
    }
}
