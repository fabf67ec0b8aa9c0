//! Bytes in: accepting sockets, framing with the per-connection carry buffer, dispatching each
//! packet to its handler, and closing connections that break the protocol.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use codec::{Limits, Packet, PingResp, ProtocolVersion, ReasonCode};
use ring_runtime::ConnId;
use tracing::debug;

use super::lifecycle::LifecycleLines;
use super::overload::refuse_in_overload;
use super::parts::Wire;
use super::throttle::Throttling;
use super::transport::{add_transport, listener_address};
use super::{BrokerShard, Ctx, Fault, client_id_of};
use crate::carry;
use crate::conn::{Connection, Phase};
use crate::guard::DoorMark;
use crate::metrics::Listener;
use crate::metrics::ShardCounters;

/// The packet type nibble of CONNECT.
const CONNECT_TYPE: u8 = codec::PacketType::Connect as u8;

impl BrokerShard {
    /// A new socket: refuse it beyond `max_connections`, else wait for its CONNECT (after its
    /// PROXY protocol header, on a listener that expects one: `proxy.rs`).
    pub(super) fn accept(&mut self, ctx: &mut Ctx, conn: ConnId, peer: SocketAddr) {
        if refuse_in_overload(&self.shared, self.figures.counters(), ctx, conn, peer) {
            return;
        }
        let transports = &self.shared.door.transports;
        // A QUIC connection's stream: its UDP address may equal a TCP listener's, so it is
        // never looked up among them (no layer, no PROXY header: QUIC's TLS is the driver's).
        let quic = ctx.is_virtual(conn);
        let local = match quic {
            true => Ok(None),
            false => listener_address(transports, ctx, conn, peer),
        };
        let Ok(local) = local else {
            ctx.abort(conn);
            return;
        };
        let proxied = local.filter(|local| transports.expects_proxy(*local));
        // Behind a PROXY protocol header the guard judges the client the header names.
        let mark = match proxied {
            Some(_) => (self.proxy_source_trusted(ctx, conn, peer)).then_some(DoorMark::Unmarked),
            None => self
                .door
                .admit_address(&self.shared.door.guard, ctx, conn, peer),
        };
        let Some(mark) = mark else {
            return;
        };
        if !self.within_max_connections(ctx, conn, peer) {
            (self.door).address_released(&self.shared.door.guard, conn, mark);
            return;
        }
        debug!(%peer, "accepted");
        let listener = match proxied {
            Some(local) => Some(self.await_proxy_header(conn, local)),
            None if quic => Some(Listener::Quic),
            None => add_transport(&self.shared.door.transports, ctx, conn, local, peer),
        };
        let Some(listener) = listener else {
            self.shared.door.connections.fetch_sub(1, Ordering::Relaxed);
            (self.door).address_released(&self.shared.door.guard, conn, mark);
            ctx.abort(conn);
            return;
        };
        let mut connection = Connection::new(self.shared.time.since_start(ctx.now()));
        connection.set_door_mark(mark);
        self.conns.insert(conn, connection);
        self.timers.arm_deadline_sweep(
            ctx,
            &self.conns,
            self.shared.config.connection.connect_timeout,
        );
        self.door.connection_opened(&self.figures, conn, listener);
    }

    /// Counts a new connection; beyond `connection.max_connections` it is refused (logged,
    /// counted, aborted).
    fn within_max_connections(&mut self, ctx: &mut Ctx, conn: ConnId, peer: SocketAddr) -> bool {
        let max = self.shared.config.connection.max_connections as usize;
        if self.shared.door.connections.fetch_add(1, Ordering::Relaxed) < max {
            return true;
        }
        self.shared.door.connections.fetch_sub(1, Ordering::Relaxed);
        self.figures
            .count_refusal(crate::metrics::Refusal::MaxConnections);
        let mut lines = LifecycleLines {
            shared: &self.shared,
            timers: &mut self.timers,
            shard: self.id,
        };
        lines.log_refused_at_max(ctx, peer, max);
        ctx.abort(conn);
        false
    }

    /// Bytes arrived: decode every complete frame, keep a partial one.
    pub(super) fn receive(&mut self, ctx: &mut Ctx, conn: ConnId, data: Bytes) {
        ShardCounters::add(&self.figures.counters().bytes_received, data.len() as u64);
        let data = match self.door.proxy_waits.is_empty() {
            true => data,
            false => match self.read_proxy_header(ctx, conn, data) {
                Some(rest) => rest,
                None => return,
            },
        };
        let since_start = self.shared.time.since_start(ctx.now());
        let Some(connection) = self.conns.get_mut(&conn) else {
            return;
        };
        if matches!(connection.phase, Phase::Closing) {
            return;
        }
        if connection.is_connected() {
            connection.touch(since_start);
        }
        let limits = Limits::new(connection.protocol)
            .with_max_packet_size(self.shared.config.limits.max_packet_size);
        let carry = connection.take_carry(&self.shared.limits.partial_frames);
        let frame_len = codec::peek_frame_len(&carry, &limits).ok().flatten();
        let buf = carry::join(carry, data, frame_len);
        if matches!(connection.phase, Phase::AwaitingConnect)
            && buf.first().is_some_and(|byte| byte >> 4 != CONNECT_TYPE)
        {
            // The first packet must be CONNECT: anything else closes the socket, with no CONNACK.
            debug!("first packet is not CONNECT: closing");
            self.wire().close_connection(ctx, conn);
            return;
        }
        if matches!(connection.phase, Phase::AwaitingConnect) && announces_v5(&buf) {
            // A CONNECT refused before it decodes is still answered in the client's version.
            connection.protocol = ProtocolVersion::V5;
        }
        let phase = connection.phase;
        if matches!(phase, Phase::AwaitingConnect | Phase::Authenticating)
            && let Some(fault) =
                connect_too_large(self.shared.config.limits.max_connect_size, &buf, &limits)
        {
            self.wire().fail(ctx, conn, fault);
            return;
        }
        if matches!(
            phase,
            Phase::AwaitingAuth | Phase::AwaitingSession | Phase::AwaitingAck
        ) {
            // Packets behind the CONNECT wait for the session, packets behind a SUBSCRIBE or
            // UNSUBSCRIBE for it to take effect everywhere (see `resume_reading`).
            self.wire().keep_carry(ctx, conn, buf);
            return;
        }
        self.decode_buffer(ctx, conn, buf);
    }

    /// Decodes and handles the complete frames of `buf`; keeps a partial one (or what waits for
    /// a session hand-over) as the connection's carry.
    fn decode_buffer(&mut self, ctx: &mut Ctx, conn: ConnId, mut buf: BytesMut) {
        let Some(connection) = self.conns.get(&conn) else {
            return;
        };
        let limits = Limits::new(connection.protocol)
            .with_max_packet_size(self.shared.config.limits.max_packet_size);
        let decoded_from = buf.len();
        self.replication.kept.reading(buf.capacity());
        if let Err(fault) = self.decode_all(ctx, conn, &mut buf, limits) {
            self.wire().fail(ctx, conn, fault);
            return;
        }
        // An idle connection holds no buffer: an empty remainder is dropped, not kept.
        self.wire()
            .keep_carry(ctx, conn, carry::compact(buf, decoded_from));
    }

    /// Handles the packets a client sent behind its CONNECT while the session was handed over
    /// from another shard (clients need not wait for CONNACK), or behind a SUBSCRIBE or
    /// UNSUBSCRIBE that has now taken effect on every shard.
    pub(super) fn resume_reading(&mut self, ctx: &mut Ctx, conn: ConnId) {
        let Some(connection) = self.conns.get_mut(&conn) else {
            return;
        };
        if !connection.has_carry() || !connection.is_connected() || connection.is_parked() {
            return;
        }
        let buf = connection.take_carry(&self.shared.limits.partial_frames);
        self.decode_buffer(ctx, conn, buf);
    }

    /// Decodes and handles frames until the buffer holds no complete frame.
    fn decode_all(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        buf: &mut BytesMut,
        mut limits: Limits,
    ) -> Result<(), Fault> {
        loop {
            let before = buf.len();
            let mut publish_len = None;
            if let Some(ack) = codec::take_short_ack(buf, &limits)? {
                self.trace_short_ack(conn, &ack);
                self.handle_short_ack(ctx, conn, ack)?;
            } else {
                let Some(packet) = codec::decode(buf, &limits)? else {
                    break;
                };
                publish_len = matches!(packet, Packet::Publish(_)).then(|| before - buf.len());
                self.trace_inbound(ctx, conn, &packet);
                self.handle_packet(ctx, conn, packet)?;
            }
            if let Some(len) = publish_len {
                // Over a publish rate the connection is parked: the loop stops below.
                let rates = self.shared.door.abuse.publish_rates();
                let mut throttling = Throttling {
                    throttle: &mut self.door.throttle,
                    timers: &mut self.timers,
                    conns: &mut self.conns,
                    counters: self.figures.counters(),
                };
                throttling.charge_publish(rates, ctx, conn, len);
            }
            match self.conns.get(&conn) {
                Some(c)
                    if matches!(
                        c.phase,
                        Phase::AwaitingConnect | Phase::Authenticating | Phase::Connected
                    ) =>
                {
                    limits.protocol = c.protocol;
                }
                _ => break,
            }
        }
        Ok(())
    }

    /// One packet: a `match` whose arms each call one handler.
    pub(super) fn handle_packet(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        packet: Packet,
    ) -> Result<(), Fault> {
        let connected = self.conns.get(&conn).is_some_and(|c| c.is_connected());
        let packet = if connected {
            let (conns, sessions) = (&self.conns, &self.sessions);
            let client_id = || client_id_of(conns, sessions, conn);
            match self.auth.hold_for_topic_checks(
                &self.shared.access,
                self.id,
                ctx,
                conn,
                packet,
                client_id,
            ) {
                Some(packet) => packet,
                None => {
                    // Its packets wait behind the one set aside (`topics_answered`).
                    if let Some(connection) = self.conns.get_mut(&conn) {
                        connection.park();
                    }
                    return Ok(());
                }
            }
        } else {
            packet
        };
        match packet {
            // The values it keeps are copied out of the receive buffer here, once.
            Packet::ConnectFrame(frame) => {
                return self.handle_connect(ctx, conn, frame.to_detached());
            }
            Packet::Connect(connect) => return self.handle_connect(ctx, conn, *connect),
            Packet::Auth(auth) if !connected => return self.exchange_round(ctx, conn, auth),
            Packet::Disconnect(_) if self.conns.is_authenticating(conn) => {
                // The client gave up its AUTH exchange: nothing to answer.
                self.wire().close_connection(ctx, conn);
                return Ok(());
            }
            _ if !connected => {
                return Err(Fault::protocol(format!(
                    "{} before CONNECT completed",
                    packet.packet_type()
                )));
            }
            Packet::Publish(publish) => self.publish_in_order(ctx, conn, publish)?,
            Packet::PubAck(ack) => self.handle_puback(ctx, conn, ack.packet_id),
            Packet::PubRec(rec) => self.handle_pubrec(ctx, conn, rec),
            Packet::PubRel(rel) => self.handle_pubrel(ctx, conn, rel.packet_id),
            Packet::PubComp(comp) => self.handle_pubcomp(ctx, conn, comp.packet_id),
            Packet::Subscribe(subscribe) => self.handle_subscribe(ctx, conn, subscribe)?,
            Packet::Unsubscribe(unsubscribe) => self.handle_unsubscribe(ctx, conn, unsubscribe),
            Packet::PingReq(_) => self
                .wire()
                .send_packet(ctx, conn, &Packet::PingResp(PingResp)),
            Packet::Disconnect(disconnect) => self.handle_disconnect(ctx, conn, disconnect)?,
            Packet::Auth(auth) => self.reauthenticate(ctx, conn, auth)?,
            other => {
                return Err(Fault::protocol(format!(
                    "{} is sent by servers only",
                    other.packet_type()
                )));
            }
        }
        Ok(())
    }
}

/// Whether a bad CONNECT may be answered with a CONNACK: always in 5.0; in 3.x only for an
/// unacceptable protocol version or client identifier, as a malformed CONNECT must be closed
/// without one (MQTT-3.1.4-1).
fn connack_allowed_for_fault(protocol: ProtocolVersion, reason: ReasonCode) -> bool {
    protocol.is_v5()
        || matches!(
            reason,
            ReasonCode::UnsupportedProtocolVersion | ReasonCode::ClientIdentifierNotValid
        )
}

/// Whether `buf` starts with a CONNECT for protocol "MQTT" level 5 (read before it decodes).
fn announces_v5(buf: &[u8]) -> bool {
    let Some(length_bytes) = buf.iter().skip(1).take(4).position(|b| b & 0x80 == 0) else {
        return false;
    };
    buf.get(2 + length_bytes..).and_then(|rest| rest.get(..7))
        == Some(&[0x00, 0x04, b'M', b'Q', b'T', b'T', 5][..])
}

impl Wire<'_> {
    /// Ends a connection for a protocol fault: DISCONNECT with the reason (5.0), then close.
    pub(super) fn fail(&mut self, ctx: &mut Ctx, conn: ConnId, fault: Fault) {
        let Some(connection) = self.conns.get(&conn) else {
            return;
        };
        debug!(
            reason = fault.reason.name(),
            detail = %fault.detail,
            "closing connection for a protocol fault"
        );
        if connection.is_connected() {
            self.send_disconnect(ctx, conn, fault.reason);
        } else if matches!(connection.phase, Phase::Authenticating) {
            // The AUTH exchange broke off: its CONNECT is answered with the fault's reason.
            self.refuse_connect_for_fault(ctx, conn, fault.reason);
        } else if matches!(connection.phase, Phase::AwaitingConnect)
            && connack_allowed_for_fault(connection.protocol, fault.reason)
        {
            self.refuse_connect_for_fault(ctx, conn, fault.reason);
        }
        self.close_connection(ctx, conn);
    }

    /// Stops reading from `conn` and closes it after its queued frames.
    pub(super) fn close_connection(&mut self, ctx: &mut Ctx, conn: ConnId) {
        if let Some(connection) = self.conns.get_mut(&conn) {
            connection.phase = Phase::Closing;
            connection.discard_carry(&self.shared.limits.partial_frames);
        }
        ctx.close(conn);
    }

    /// Keeps `buf` as `conn`'s partial frame, charged to the broker's partial-frame budget; a
    /// connection whose partial frame does not fit is closed (5.0: 0x97) and counted.
    fn keep_carry(&mut self, ctx: &mut Ctx, conn: ConnId, buf: BytesMut) {
        let Some(connection) = self.conns.get_mut(&conn) else {
            return;
        };
        if matches!(connection.phase, Phase::Closing) {
            return;
        }
        let Err(over) = connection.keep_carry(buf, &self.shared.limits.partial_frames) else {
            return;
        };
        ShardCounters::add(&self.figures.counters().partial_frame_closed, 1);
        let budget = self.shared.limits.partial_frames.limit();
        self.fail(
            ctx,
            conn,
            Fault::new(
                ReasonCode::QuotaExceeded,
                format!(
                    "partial packet of {} bytes over limits.max_partial_frame_bytes ({budget} in all)",
                    over.bytes
                ),
            ),
        );
    }
}

/// A fault when `buf` starts with a CONNECT announcing more than `limits.max_connect_size`
/// (judged once the protocol level has arrived, so a 5.0 client gets its CONNACK 0x95).
fn connect_too_large(max: u32, buf: &[u8], limits: &Limits) -> Option<Fault> {
    const CONNECT_HEAD: usize = 12;
    let size = codec::peek_frame_len(buf, limits).ok().flatten()?;
    if size <= max as usize || buf.len() < CONNECT_HEAD {
        return None;
    }
    debug!(size, max, "CONNECT over limits.max_connect_size: refused");
    Some(Fault::new(
        ReasonCode::PacketTooLarge,
        format!("CONNECT of {size} bytes over limits.max_connect_size ({max})"),
    ))
}
