//! One MQTT session: its subscriptions, inflight and queued messages, QoS 2 state and will.
//! A session lives on exactly one shard at a time; it moves (as a whole) on takeover.
//!
//! The session holds some of the broker's own types (its subscriber key, parsed filters,
//! message copies, connection and timer handles). session-store depends on neither the router
//! nor the runtime, so [`Session`] is generic over a [`SessionTypes`] bundle that the broker
//! binds once (`crates/broker-core/src/session.rs`); monomorphised, it costs nothing at run time
//! and the layout is the broker's.

mod subscriptions;

use std::fmt::Debug;
use std::hash::Hash;
use std::time::Duration;

use codec::{MqttStr, PacketId, ProtocolVersion, Will};

use crate::{AwaitingRelease, InboundQos2, InflightWindow, MessageQueue, Weighed};

pub use subscriptions::{SessionSubscription, SubscriptionList};

/// The broker's types a [`Session`] holds (a marker type implements this once).
pub trait SessionTypes {
    /// The compact key the subscription tables know a session by (the router's subscriber id).
    type Subscriber: Copy + Eq + Hash + Debug;
    /// A parsed subscription filter (the router's).
    type Filter: Clone + Debug;
    /// One message copy for this session, queued or in flight.
    type Message: Weighed + Debug;
    /// A handle to the session's connection (the runtime's connection id).
    type Conn: Copy + Eq + Debug;
    /// A handle to an armed timer.
    type Timer: Copy + Eq + Debug;
}

/// Session Expiry Interval: `Never` for 0xFFFFFFFF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionExpiry {
    /// The session ends when the connection closes.
    OnClose,
    /// The session ends this many seconds after the connection closes.
    After(u32),
    /// The session never expires.
    Never,
}

impl SessionExpiry {
    /// From the wire value, capped by the configured maximum (whole seconds).
    pub fn from_interval(seconds: u32, max: Duration) -> Self {
        let max = u32::try_from(max.as_secs()).unwrap_or(u32::MAX);
        match seconds {
            0 => Self::OnClose,
            u32::MAX if max == u32::MAX => Self::Never,
            s => Self::After(s.min(max)),
        }
    }
}

/// A will waiting to be published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingWill {
    /// The will from CONNECT.
    pub will: Will,
    /// The Will Delay Interval.
    pub delay: Duration,
}

/// The timers of a disconnected session (boxed: connected sessions, the common case, have none).
#[derive(Debug)]
pub struct SessionTimers<T> {
    /// Its expiry timer.
    pub expiry: Option<T>,
    /// Its will-delay timer.
    pub will: Option<T>,
}

impl<T> Default for SessionTimers<T> {
    fn default() -> Self {
        Self {
            expiry: None,
            will: None,
        }
    }
}

/// One session (112 bytes with the broker's types: one allocation of mimalloc's 112-byte class).
#[derive(Debug)]
pub struct Session<T: SessionTypes> {
    /// The client identifier.
    pub client_id: MqttStr,
    /// The compact key the subscription tables know this session by.
    pub subscriber: T::Subscriber,
    /// The protocol version of its latest connection.
    pub protocol: ProtocolVersion,
    /// Its subscriptions, by filter text.
    pub subscriptions: SubscriptionList<T::Filter>,
    /// QoS 1/2 messages sent and not yet acknowledged.
    pub inflight: InflightWindow<T::Message>,
    /// Messages waiting for the client (offline, window full or connection backlogged).
    pub queue: MessageQueue<T::Message>,
    /// How long it outlives its connection.
    pub expiry: SessionExpiry,
    /// The will of its current connection, if any (boxed: most sessions have none).
    pub will: Option<Box<PendingWill>>,
    /// Its current connection.
    pub conn: Option<T::Conn>,
    /// Its expiry and will-delay timers (armed while disconnected), its on-disk queue tail and
    /// its inbound QoS 2 ids awaiting PUBREL; boxed and allocated only while it has one of them.
    extras: Option<Box<SessionExtras<T::Timer>>>,
}

/// The rarely present parts of a session.
#[derive(Debug)]
struct SessionExtras<T> {
    timers: SessionTimers<T>,
    /// Queued messages held on disk only, beyond the in-memory part of the queue (a stored
    /// session whose queue outgrew its memory bound).
    spilled: Option<SpilledQueue>,
    /// Inbound QoS 2 packet ids awaiting PUBREL (most sessions never receive QoS 2, and those
    /// that do hold an id only until its PUBREL).
    awaiting_release: AwaitingRelease,
}

impl<T> Default for SessionExtras<T> {
    fn default() -> Self {
        Self {
            timers: SessionTimers::default(),
            spilled: None,
            awaiting_release: AwaitingRelease::default(),
        }
    }
}

impl<T> SessionExtras<T> {
    fn is_empty(&self) -> bool {
        self.timers.expiry.is_none()
            && self.timers.will.is_none()
            && self.spilled.is_none()
            && self.awaiting_release.is_empty()
    }
}

/// The on-disk-only tail of a stored session's queue: every stored queued message with a
/// sequence number above `after` is on disk only; the in-memory queue holds the ones before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpilledQueue {
    /// Messages on disk only (as counted here; the disk has the last word).
    pub on_disk: u64,
    /// Every queued message above this sequence number is on disk only.
    pub after: u64,
    /// The read back now under way, if any (its number: a result for another is stale).
    pub reading: Option<u64>,
    /// Messages put on disk since that read was asked for (it cannot see them).
    pub written_since_read: u64,
}

impl<T: SessionTypes> Session<T> {
    /// A fresh session whose inflight window holds at most `max_inflight` messages
    /// (`limits.max_inflight_outbound`).
    pub fn new(client_id: MqttStr, subscriber: T::Subscriber, max_inflight: u16) -> Box<Self> {
        Box::new(Self {
            client_id,
            subscriber,
            protocol: ProtocolVersion::V3_1_1,
            subscriptions: SubscriptionList::default(),
            inflight: InflightWindow::new(max_inflight),
            queue: MessageQueue::new(),
            expiry: SessionExpiry::OnClose,
            will: None,
            conn: None,
            extras: None,
        })
    }

    /// Takes both timers (to disarm them).
    pub fn take_timers(&mut self) -> SessionTimers<T::Timer> {
        let Some(extras) = self.extras.as_mut() else {
            return SessionTimers::default();
        };
        let timers = std::mem::take(&mut extras.timers);
        self.free_extras_if_empty();
        timers
    }

    /// The on-disk-only tail of its queue, if it has one.
    pub fn spilled(&self) -> Option<&SpilledQueue> {
        self.extras.as_ref()?.spilled.as_ref()
    }

    /// See [`Self::spilled`].
    pub fn spilled_mut(&mut self) -> Option<&mut SpilledQueue> {
        self.extras.as_mut()?.spilled.as_mut()
    }

    /// Sets (or clears) the on-disk-only tail of its queue.
    pub fn set_spilled(&mut self, spilled: Option<SpilledQueue>) {
        self.extras_mut().spilled = spilled;
        self.free_extras_if_empty();
    }

    /// Records the expiry timer.
    pub fn set_expiry_timer(&mut self, timer: Option<T::Timer>) {
        self.extras_mut().timers.expiry = timer;
        self.free_extras_if_empty();
    }

    /// Records the will-delay timer.
    pub fn set_will_timer(&mut self, timer: Option<T::Timer>) {
        self.extras_mut().timers.will = timer;
        self.free_extras_if_empty();
    }

    /// Records a received QoS 2 PUBLISH ([`AwaitingRelease::record`]; `limit` is our Receive
    /// Maximum).
    pub fn record_awaiting_release(&mut self, id: PacketId, limit: usize) -> InboundQos2 {
        let outcome = self.extras_mut().awaiting_release.record(id, limit);
        self.free_extras_if_empty();
        outcome
    }

    /// PUBREL received: releases the id. Returns whether it was known
    /// ([`AwaitingRelease::release`]).
    pub fn release_awaiting(&mut self, id: PacketId) -> bool {
        let Some(extras) = self.extras.as_mut() else {
            return false;
        };
        let released = extras.awaiting_release.release(id);
        self.free_extras_if_empty();
        released
    }

    /// The inbound QoS 2 ids awaiting PUBREL, oldest first.
    pub fn awaiting_release(&self) -> impl Iterator<Item = PacketId> + '_ {
        self.extras
            .iter()
            .flat_map(|extras| extras.awaiting_release.iter())
    }

    fn extras_mut(&mut self) -> &mut SessionExtras<T::Timer> {
        self.extras.get_or_insert_with(Box::default)
    }

    fn free_extras_if_empty(&mut self) {
        if self.extras.as_ref().is_some_and(|e| e.is_empty()) {
            self.extras = None;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Stand-ins for the broker's types, of the same sizes (a 64-bit key, a 24-byte filter, an
    /// 8-byte connection id, a 16-byte timer handle).
    #[derive(Debug)]
    pub(crate) enum TestTypes {}

    #[derive(Debug)]
    pub(crate) struct TestMessage(pub(crate) u64);

    impl Weighed for TestMessage {
        fn weight(&self) -> u64 {
            self.0
        }
    }

    impl SessionTypes for TestTypes {
        type Subscriber = u64;
        type Filter = String;
        type Message = TestMessage;
        type Conn = u64;
        type Timer = (u64, u64);
    }

    #[test]
    fn expiry_interval_is_capped() {
        let max = Duration::from_secs(100);
        assert_eq!(SessionExpiry::from_interval(0, max), SessionExpiry::OnClose);
        assert_eq!(
            SessionExpiry::from_interval(50, max),
            SessionExpiry::After(50)
        );
        assert_eq!(
            SessionExpiry::from_interval(u32::MAX, max),
            SessionExpiry::After(100)
        );
        let unlimited = Duration::from_secs(u64::from(u32::MAX));
        assert_eq!(
            SessionExpiry::from_interval(u32::MAX, unlimited),
            SessionExpiry::Never
        );
    }

    #[test]
    fn timers_are_boxed_only_while_armed() {
        let id = MqttStr::from_bytes(bytes::Bytes::from_static(b"c")).unwrap();
        let mut session = Session::<TestTypes>::new(id, 1, 10);
        assert!(session.extras.is_none());
        session.set_expiry_timer(Some((1, 2)));
        session.set_will_timer(Some((3, 4)));
        session.set_expiry_timer(None);
        assert!(session.extras.is_some());
        session.set_will_timer(None);
        assert!(session.extras.is_none());
        session.set_will_timer(Some((3, 4)));
        let taken = session.take_timers();
        assert_eq!((taken.expiry, taken.will), (None, Some((3, 4))));
        assert!(session.extras.is_none());
    }

    #[test]
    fn qos2_ids_are_boxed_only_while_awaiting_release() {
        let client = MqttStr::from_bytes(bytes::Bytes::from_static(b"c")).unwrap();
        let mut session = Session::<TestTypes>::new(client, 1, 10);
        let (a, b) = (PacketId::new(1).unwrap(), PacketId::new(2).unwrap());
        assert!(!session.release_awaiting(a), "nothing awaits release yet");
        assert_eq!(session.record_awaiting_release(a, 1), InboundQos2::New);
        assert_eq!(
            session.record_awaiting_release(b, 1),
            InboundQos2::OverLimit
        );
        assert_eq!(
            session.record_awaiting_release(a, 1),
            InboundQos2::Duplicate
        );
        assert_eq!(session.awaiting_release().collect::<Vec<_>>(), vec![a]);
        session.set_expiry_timer(Some((1, 2)));
        assert!(session.release_awaiting(a));
        assert!(session.extras.is_some(), "the timer still needs the box");
        session.set_expiry_timer(None);
        assert!(session.extras.is_none());
        assert_eq!(session.record_awaiting_release(b, 1), InboundQos2::New);
        assert!(session.release_awaiting(b));
        assert!(session.extras.is_none(), "freed with the last id released");
        assert_eq!(session.awaiting_release().count(), 0);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_session_fits_a_128_byte_allocation() {
        assert!(std::mem::size_of::<Session<TestTypes>>() <= 128);
    }
}
