//! Per-connection protocol state, owned by the shard that accepted the socket.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::shard::ArmedTimer;
use bytes::BytesMut;
use codec::{Connect, MqttStr, ProtocolVersion};

use crate::alias::{InboundAliases, OutboundAliases};
use crate::message::PRE_CONNECT_PROTOCOL;

/// Where a connection is in its life.
#[derive(Debug)]
pub enum Phase {
    /// Accepted; its CONNECT has not arrived.
    AwaitingConnect,
    /// CONNECT received; waiting for another shard to hand over the session.
    AwaitingSession(Box<Connect>),
    /// CONNACK sent; packets flow.
    Connected,
    /// Closing: nothing more is read from it.
    Closing,
}

/// One client connection.
#[derive(Debug)]
pub struct Connection {
    /// The peer's address (for logs).
    pub peer: SocketAddr,
    /// Its phase.
    pub phase: Phase,
    /// Bytes of an incomplete frame, kept only while a frame is partial.
    pub carry: BytesMut,
    /// Its protocol version (3.1.1 wire rules until CONNECT says otherwise).
    pub protocol: ProtocolVersion,
    /// Its client identifier once connected.
    pub client_id: Option<MqttStr>,
    /// Keep-alive grace (1.5 x the keep-alive), `None` when disabled.
    pub keep_alive_grace: Option<Duration>,
    /// When a packet last arrived.
    pub last_activity: Instant,
    /// The CONNECT-timeout or keep-alive timer.
    pub timer: Option<ArmedTimer>,
    /// Topic aliases the client set towards us.
    pub inbound_aliases: InboundAliases,
    /// Topic aliases we use towards the client (`None` when it allows none: most clients).
    pub outbound_aliases: Option<Box<OutboundAliases>>,
    /// Largest packet the client accepts.
    pub client_max_packet: u32,
    /// Whether the will is published when this connection ends (false after a normal
    /// DISCONNECT).
    pub publish_will: bool,
    /// Session expiry set by a 5.0 DISCONNECT, applied when the connection ends.
    pub expiry_on_close: Option<u32>,
    /// Whether it completed CONNECT (and so counts in `$SYS/broker/clients/connected` until it
    /// closes).
    pub counted: bool,
}

impl Connection {
    /// A freshly accepted connection.
    pub fn new(peer: SocketAddr, now: Instant) -> Self {
        Self {
            peer,
            phase: Phase::AwaitingConnect,
            carry: BytesMut::new(),
            protocol: PRE_CONNECT_PROTOCOL,
            client_id: None,
            keep_alive_grace: None,
            last_activity: now,
            timer: None,
            inbound_aliases: InboundAliases::new(0),
            outbound_aliases: None,
            client_max_packet: u32::MAX,
            publish_will: true,
            expiry_on_close: None,
            counted: false,
        }
    }

    /// Whether packets other than CONNECT may be processed.
    pub fn is_connected(&self) -> bool {
        matches!(self.phase, Phase::Connected)
    }
}
