//! A single-shard broker on `ring-runtime`'s simulated shard (feature `sim`): the real
//! [`BrokerShard`] driven without sockets, threads or wall-clock time. A driver opens virtual
//! connections, feeds them bytes, moves the clock and reads back what the broker sent, so the
//! protocol logic runs as a deterministic state machine (bytes and time in, bytes and closes
//! out). For the `broker_session` fuzz target and deterministic tests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use codec::{DecodeError, EncodeError, Limits, Packet, ProtocolVersion};
use ring_runtime::sim::SimShard;
use ring_runtime::{Clock, CloseReason, ConnId, ManualClock, ShardId};

use crate::auth::{AllowAll, Authenticator};
use crate::config::Config;
use crate::message::ShardMsg;
use crate::shard::BrokerShard;
use crate::shared::Shared;

/// What the broker sent that a client could not decode.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A malformed frame.
    #[error("malformed frame from the broker: {0}")]
    Decode(#[from] DecodeError),
    /// The output ended inside a frame (every write completes whole in the simulation).
    #[error("the broker's output ends inside a frame ({left} bytes left)")]
    Truncated {
        /// Bytes of the incomplete frame.
        left: usize,
    },
}

/// One broker shard (shard 0 of 1) on virtual connections and a manual clock.
pub struct SimBroker {
    sim: SimShard<BrokerShard>,
    next_port: u16,
}

impl SimBroker {
    /// A broker with `config` (its shard count, listeners and backend are ignored) that allows
    /// everything.
    pub fn new(config: Config) -> Self {
        Self::with_auth(config, Box::new(AllowAll))
    }

    /// Like [`SimBroker::new`], with `auth` deciding on CONNECT, SUBSCRIBE and PUBLISH.
    pub fn with_auth(mut config: Config, auth: Box<dyn Authenticator>) -> Self {
        // No listener: skip reading the kernel's backlog limit.
        config.runtime.listen_backlog = Some(1);
        let runtime = crate::runtime_settings::runtime_config(&config);
        let clock = ManualClock::new();
        let shared = Shared::with_clock(config.core, 1, auth, Clock::Manual(clock.clone()));
        let shard = BrokerShard::new(Arc::new(shared), ShardId::new(0), 1);
        let mut sim = SimShard::new(shard, &runtime, clock);
        sim.post(vec![ShardMsg::Start]);
        Self { sim, next_port: 1 }
    }

    /// A new client connection (accepted, CONNECT timeout armed).
    pub fn connect(&mut self) -> ConnId {
        let peer = SocketAddr::from(([127, 0, 0, 1], self.next_port));
        self.next_port = self.next_port.wrapping_add(1);
        self.sim.accept(peer)
    }

    /// `bytes` arrive from the client on `conn`.
    pub fn send(&mut self, conn: ConnId, bytes: Bytes) {
        self.sim.data(conn, bytes);
    }

    /// Packets from several clients arrive in one turn, in order (each encoded for `protocol`).
    pub fn send_together(
        &mut self,
        arrivals: &[(ConnId, &Packet)],
        protocol: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        let mut encoded = Vec::with_capacity(arrivals.len());
        for (conn, packet) in arrivals {
            let mut buf = BytesMut::new();
            codec::encode(packet, protocol, &mut buf)?;
            encoded.push((*conn, buf.freeze()));
        }
        self.sim.data_together(encoded);
        Ok(())
    }

    /// `packet`, encoded for `protocol`, arrives from the client on `conn`.
    pub fn send_packet(
        &mut self,
        conn: ConnId,
        packet: &Packet,
        protocol: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        let mut buf = BytesMut::new();
        codec::encode(packet, protocol, &mut buf)?;
        self.send(conn, buf.freeze());
        Ok(())
    }

    /// The client half-closes `conn` (FIN).
    pub fn peer_closed(&mut self, conn: ConnId) {
        self.sim.peer_closed(conn);
    }

    /// The client resets `conn`.
    pub fn reset(&mut self, conn: ConnId) {
        self.sim.reset(conn);
    }

    /// Moves the clock forward; timers now due fire (keep-alive, expiry, will delay, ...).
    pub fn advance(&mut self, by: Duration) {
        self.sim.advance(by);
    }

    /// The bytes the broker sent on `conn` since the last call.
    pub fn take_output(&mut self, conn: ConnId) -> Bytes {
        self.sim.take_output(conn)
    }

    /// The packets the broker sent on `conn` since the last call, decoded for `protocol`.
    pub fn received(
        &mut self,
        conn: ConnId,
        protocol: ProtocolVersion,
    ) -> Result<Vec<Packet>, SimError> {
        let mut buf = BytesMut::from(self.take_output(conn));
        let limits = Limits::new(protocol);
        let mut packets = Vec::new();
        while let Some(packet) = codec::decode(&mut buf, &limits)? {
            packets.push(packet);
        }
        match buf.len() {
            0 => Ok(packets),
            left => Err(SimError::Truncated { left }),
        }
    }

    /// Whether the broker closed `conn` (and it was released), and why.
    pub fn closed(&self, conn: ConnId) -> Option<CloseReason> {
        self.sim.closed(conn)
    }

    /// Whether the broker will send nothing more on `conn` (closed or write side shut).
    pub fn write_shut(&self, conn: ConnId) -> bool {
        self.sim.write_shut(conn)
    }

    /// The simulated shard (its context's counters, its settling).
    pub fn shard(&self) -> &SimShard<BrokerShard> {
        &self.sim
    }
}

#[cfg(test)]
#[path = "sim_tests.rs"]
mod tests;
