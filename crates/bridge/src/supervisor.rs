//! A bridge's own thread: connect the remote, then the local broker, forward until one fails,
//! wait (backoff), and again, until told to stop.

use std::net::SocketAddr;
use std::num::NonZeroU16;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use codec::{ConnAck, Connect, ConnectProperties, Packet, ProtocolVersion, ReasonCode};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use tracing::{info, warn};

use super::backoff::Backoff;
use super::error::BridgeError;
use super::link::{self, Closer, Link};
use super::mqtt::{self, Framed, mqtt_str};
use super::session::{Ended, Event, Peer, Session, Side, TICK, subscriptions};
use super::stats::BridgeCounters;
use super::tls::TlsClient;
use crate::settings::BridgeSettings;
use broker_api::Secret;

/// Longest wait for a TCP connection, a TLS handshake or a CONNACK.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Keep-alive of the local connection, seconds.
const LOCAL_KEEP_ALIVE: u16 = 60;

/// One open connection: its writing side, what its CONNACK said, and its closer.
struct Opened {
    peer: Peer,
    framed: Framed,
    window: usize,
    closer: Closer,
}

/// What a bridge's thread owns.
pub(crate) struct Supervisor {
    pub(crate) settings: Arc<BridgeSettings>,
    pub(crate) counters: Arc<BridgeCounters>,
    /// The local broker's first TCP listener (loopback when it listens on every address).
    pub(crate) local: SocketAddr,
    /// Where the local connection registers its source address (the `[ip]` guard exempts it).
    pub(crate) own: Arc<broker_api::OwnLinks>,
    pub(crate) events: Receiver<Event>,
    /// Handed to each period's reader threads.
    pub(crate) sender: Sender<Event>,
    /// Set when the bridge is to stop.
    pub(crate) stop: Arc<AtomicBool>,
    /// Start the local session afresh (the bridge's rules changed: old subscriptions go).
    pub(crate) fresh_local: bool,
    /// The remote accepted (or was not yet offered) the 3.1.1 bridge marker.
    pub(crate) marker_ok: bool,
    pub(crate) epoch: u64,
}

impl Supervisor {
    /// Runs until `Stop` arrives.
    pub(crate) fn run(mut self) {
        let name = self.settings.name.clone();
        let _span = tracing::info_span!("bridge", bridge = %name).entered();
        self.prepare_local_session();
        let mut backoff = Backoff::new(self.settings.reconnect_min, self.settings.reconnect_max);
        while !self.stopped() {
            let started = Instant::now();
            match self.connected_period() {
                Ok(Ended::Stopped) => return,
                Err(error) => warn!(%error, "bridge down"),
            }
            self.counters.set_connected(false);
            if started.elapsed() > backoff.step() {
                backoff.reset();
            }
            if self.wait(backoff.next_delay()) {
                return;
            }
            self.counters.count_reconnect();
        }
    }

    /// Waits `delay` unless `Stop` arrives first (then `true`). Packets of ended periods
    /// are dropped meanwhile, so their readers never block.
    fn wait(&self, delay: Duration) -> bool {
        let deadline = Instant::now() + delay;
        loop {
            if self.stopped() {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left.min(TICK)) {
                Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => return true,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) if left <= TICK => return false,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Creates (or renews) the local session and its subscriptions before the remote is
    /// reached: from then on the local broker queues QoS 1/2 messages for the bridge.
    fn prepare_local_session(&mut self) {
        if subscriptions(&self.settings.topics, Side::Local).is_ok_and(|s| s.is_empty()) {
            return;
        }
        let prepared = self.open_local(self.fresh_local).and_then(|mut opened| {
            let filters = subscriptions(&self.settings.topics, Side::Local)?;
            let packet_id =
                codec::PacketId::new(super::flow::SUBSCRIBE_ID).ok_or(BridgeError::Closed)?;
            let subscribe = codec::Subscribe {
                packet_id,
                filters,
                properties: codec::SubscribeProperties::default(),
            };
            opened.peer_send(&Packet::Subscribe(subscribe))?;
            // Queued or retained messages arriving meanwhile are left unacknowledged: the broker
            // sends them again on the session's next connection.
            while !matches!(opened.framed.next_packet()?, Packet::SubAck(_)) {}
            opened.peer_send(&Packet::Disconnect(codec::Disconnect::default()))
        });
        match prepared {
            Ok(()) => self.fresh_local = false,
            Err(error) => warn!(%error, "could not prepare the bridge's local session"),
        }
    }

    /// Connects both sides and forwards until one fails or `Stop` arrives.
    fn connected_period(&mut self) -> Result<Ended, BridgeError> {
        self.epoch += 1;
        let remote = self.open_remote()?;
        // Stopped while connecting (and no longer waited for): this broker's session may belong
        // to a restarted bridge of the same name by now.
        if self.stopped() {
            return Ok(Ended::Stopped);
        }
        let local = self.open_local(self.fresh_local)?;
        self.fresh_local = false;
        let Opened {
            peer: remote_peer,
            framed: remote_framed,
            window: remote_window,
            closer: remote_closer,
        } = remote;
        let Opened {
            peer: local_peer,
            framed: local_framed,
            window: local_window,
            closer: local_closer,
        } = local;
        remote_closer.set_read_timeout(None)?;
        local_closer.set_read_timeout(None)?;
        self.spawn_reader(Side::Remote, remote_framed)?;
        self.spawn_reader(Side::Local, local_framed)?;
        info!(address = %self.settings.address, "bridge connected");
        // A 3.1.1 remote that did not take the bridge marker sends back what the bridge sends.
        let guard_echo = self.settings.protocol == ProtocolVersion::V3_1_1
            && !(self.settings.try_private && self.marker_ok);
        let mut session = Session::new(
            &self.settings,
            &self.counters,
            (remote_peer, remote_window),
            (local_peer, local_window),
            guard_echo,
        );
        let ended = session.run(&self.events, self.epoch, &self.stop);
        drop((remote_closer, local_closer));
        ended
    }

    fn spawn_reader(&self, side: Side, mut framed: Framed) -> Result<(), BridgeError> {
        let sender = self.sender.clone();
        let epoch = self.epoch;
        std::thread::Builder::new()
            .name(format!("bridge-{}", side.name()))
            .spawn(move || {
                loop {
                    let event = match framed.next_packet() {
                        Ok(packet) => Event::Packet {
                            epoch,
                            side,
                            packet,
                        },
                        Err(error) => {
                            let _ = sender.send(Event::Closed { epoch, side, error });
                            return;
                        }
                    };
                    if sender.send(event).is_err() {
                        return;
                    }
                }
            })?;
        Ok(())
    }

    /// The remote connection; with a 3.1.1 remote that refuses the bridge marker, connects
    /// again without it (and stops offering it).
    fn open_remote(&mut self) -> Result<Opened, BridgeError> {
        let marker = self.marker_ok
            && self.settings.try_private
            && self.settings.protocol == ProtocolVersion::V3_1_1;
        match self.open_remote_once(marker) {
            Err(
                BridgeError::Refused(ReasonCode::UnsupportedProtocolVersion)
                | BridgeError::Closed
                | BridgeError::Protocol(_)
                | BridgeError::Io(_),
            ) if marker => {
                info!(
                    "the remote refused the bridge marker (try_private); connecting as a plain client"
                );
                self.marker_ok = false;
                self.open_remote_once(false)
            }
            other => other,
        }
    }

    fn open_remote_once(&self, marker: bool) -> Result<Opened, BridgeError> {
        let s = &self.settings;
        let tls = s
            .tls
            .as_ref()
            .map(|tls| TlsClient::load(tls, &s.address))
            .transpose()?;
        let write_timeout = Duration::from_secs(s.keep_alive.into()).max(CONNECT_TIMEOUT);
        let link = link::open(&s.address, tls.as_ref(), CONNECT_TIMEOUT, write_timeout)?;
        let connect = remote_connect(s)?;
        let keep_alive = s.keep_alive;
        let (opened, connack) = handshake(link, connect, marker)?;
        let keep_alive = connack.properties.server_keep_alive.unwrap_or(keep_alive);
        Ok(opened.with(s.protocol, keep_alive, &connack, s.max_inflight))
    }

    fn open_local(&self, clean_start: bool) -> Result<Opened, BridgeError> {
        let write_timeout = Duration::from_secs(LOCAL_KEEP_ALIVE.into());
        let link = link::open_own(self.local, &self.own, CONNECT_TIMEOUT, write_timeout)?;
        let connect = local_connect(&self.settings, clean_start)?;
        let (opened, connack) = handshake(link, connect, false).map_err(|error| match error {
            BridgeError::Refused(reason) => BridgeError::LocalRefused(reason),
            other => other,
        })?;
        let keep_alive = connack
            .properties
            .server_keep_alive
            .unwrap_or(LOCAL_KEEP_ALIVE);
        Ok(opened.with(
            ProtocolVersion::V5,
            keep_alive,
            &connack,
            self.settings.max_inflight,
        ))
    }
}

/// A link after its CONNECT/CONNACK, before its peer is set up.
struct Handshaken {
    writer: link::LinkWriter,
    framed: Framed,
    closer: Closer,
}

fn handshake(
    link: Link,
    connect: Connect,
    marker: bool,
) -> Result<(Handshaken, ConnAck), BridgeError> {
    let Link {
        reader,
        mut writer,
        closer,
    } = link;
    let mut framed = Framed::new(reader, connect.protocol);
    let connack = mqtt::handshake(&mut writer, &mut framed, connect, marker)?;
    Ok((
        Handshaken {
            writer,
            framed,
            closer,
        },
        connack,
    ))
}

impl Handshaken {
    /// The peer, with the window and packet size its CONNACK announced (a 3.1.1 broker
    /// announces none: `default_window`).
    fn with(
        self,
        protocol: ProtocolVersion,
        keep_alive: u16,
        connack: &ConnAck,
        default_window: u16,
    ) -> Opened {
        let window = connack
            .properties
            .receive_maximum
            .map_or(default_window, NonZeroU16::get);
        let max_packet = connack.properties.maximum_packet_size.map(|m| m.get());
        Opened {
            peer: Peer::new(self.writer, protocol, keep_alive, max_packet),
            framed: self.framed,
            window: usize::from(window.min(default_window)),
            closer: self.closer,
        }
    }
}

impl Opened {
    fn peer_send(&mut self, packet: &Packet) -> Result<(), BridgeError> {
        self.peer.send(packet)
    }
}

/// Who a CONNECT logs in as.
struct Login<'a> {
    client_id: &'a str,
    username: Option<&'a str>,
    password: Option<&'a Secret>,
}

/// A CONNECT without a will.
fn connect_packet(
    protocol: ProtocolVersion,
    (clean_start, keep_alive): (bool, u16),
    login: Login<'_>,
    properties: ConnectProperties,
) -> Result<Connect, BridgeError> {
    Ok(Connect {
        protocol,
        clean_start,
        keep_alive,
        client_id: mqtt_str(login.client_id)?,
        will: None,
        username: login.username.map(mqtt_str).transpose()?,
        password: login
            .password
            .map(|p| Bytes::copy_from_slice(p.0.as_bytes())),
        properties,
    })
}

/// The CONNECT to the remote broker.
fn remote_connect(s: &BridgeSettings) -> Result<Connect, BridgeError> {
    let mut properties = ConnectProperties::default();
    if s.protocol.is_v5() {
        properties.session_expiry_interval = (!s.clean_start).then_some(u32::MAX);
        properties.receive_maximum = NonZeroU16::new(s.max_inflight);
    }
    let login = Login {
        client_id: &s.client_id,
        username: s.username.as_deref(),
        password: s.password.as_ref(),
    };
    connect_packet(s.protocol, (s.clean_start, s.keep_alive), login, properties)
}

/// The CONNECT to the local broker: MQTT 5.0, a session that outlives the connection (the
/// broker lowers the expiry to `sessions.max_session_expiry`), so the broker queues QoS 1/2
/// messages for the bridge while the remote is unreachable.
fn local_connect(s: &BridgeSettings, clean_start: bool) -> Result<Connect, BridgeError> {
    let properties = ConnectProperties {
        session_expiry_interval: Some(u32::MAX),
        receive_maximum: NonZeroU16::new(s.max_inflight),
        ..ConnectProperties::default()
    };
    let login = Login {
        client_id: &s.local_client_id,
        username: s.local_username.as_deref(),
        password: s.local_password.as_ref(),
    };
    connect_packet(
        ProtocolVersion::V5,
        (clean_start, LOCAL_KEEP_ALIVE),
        login,
        properties,
    )
}
