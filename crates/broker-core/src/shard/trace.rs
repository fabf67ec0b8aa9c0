//! Live traces on this shard (`crate::trace`): which of its connections a running trace
//! follows (marked at their CONNECT, and again whenever a trace starts or stops), and the lines
//! their packets write, in and out; PUBLISH packets also go to the topic traces their topic
//! matches. While no trace runs a packet looks at one shard-local flag
//! ([`TraceBook::active`](super::trace_book::TraceBook)), a CONNECT also at one relaxed load.

use codec::{Packet, ShortAck};
use ring_runtime::ConnId;

use super::trace_book::TracedConn;
use super::{BrokerShard, Ctx, client_id_of};
use crate::message::CopyView;
use crate::trace::{Direction, Identity, PacketLine, publish_line, short_ack_line};

impl BrokerShard {
    /// A packet read from `conn` (before it is handled): its line for the traces following
    /// the connection (a CONNECT first decides whether they do) and, for a PUBLISH, for the
    /// topic traces.
    #[inline]
    pub(super) fn trace_inbound(&mut self, ctx: &Ctx, conn: ConnId, packet: &Packet) {
        let names = match packet {
            Packet::ConnectFrame(frame) => Some((frame.client_id(), frame.username())),
            Packet::Connect(c) => Some((
                c.client_id.as_str(),
                c.username.as_ref().map(|u| u.as_str()),
            )),
            _ => None,
        };
        if let Some((client_id, username)) = names
            && self.shared.links.traces.identity_traces()
        {
            let identity = Identity {
                client_id: Some(client_id),
                username,
                address: ctx.peer_addr(conn).ok().map(|a| a.ip()),
            };
            self.follow(conn, client_id, identity, ctx);
        }
        if !self.figures.traces.active {
            return;
        }
        self.figures.traces.packet(conn, Direction::In, packet);
        if let Packet::Publish(publish) = packet
            && self.shared.links.traces.topic_traces()
        {
            let line = PacketLine::of(publish);
            self.trace_topic(ctx, conn, Direction::In, line);
        }
    }

    /// A PUBACK, PUBREC, PUBREL or PUBCOMP read without its body.
    #[inline]
    pub(super) fn trace_short_ack(&self, conn: ConnId, ack: &ShortAck) {
        let book = &self.figures.traces;
        if book.by_conn.is_empty() {
            return;
        }
        if let Some(traced) = book.by_conn.get(&conn) {
            let line = short_ack_line(
                Direction::In,
                &traced.client,
                ack.packet,
                ack.packet_id.get(),
            );
            traced.traces.iter().for_each(|trace| trace.write(&line));
        }
    }

    /// A PUBLISH copy queued on `conn`.
    #[inline]
    pub(super) fn trace_copy(
        &self,
        ctx: &Ctx,
        conn: ConnId,
        copy: CopyView<'_>,
        packet_id: Option<u16>,
        dup: bool,
    ) {
        if !self.figures.traces.active {
            return;
        }
        let topic_traces = self.shared.links.traces.topic_traces();
        let line = PacketLine {
            topic: copy.message.publish.topic().as_str(),
            qos: copy.qos,
            packet_id,
            dup,
            retain: copy.retain,
            payload: copy.message.publish.payload(),
        };
        if let Some(traced) = self.figures.traces.by_conn.get(&conn) {
            for trace in &traced.traces {
                let payload_bytes = trace.spec.payload_bytes;
                trace.write(&publish_line(
                    Direction::Out,
                    &traced.client,
                    line,
                    None,
                    payload_bytes,
                ));
            }
        }
        if topic_traces {
            self.trace_topic(ctx, conn, Direction::Out, line);
        }
    }

    fn trace_topic(&self, ctx: &Ctx, conn: ConnId, direction: Direction, line: PacketLine<'_>) {
        let traces = self.shared.links.traces.on_topic(line.topic, ctx.now());
        if traces.is_empty() {
            return;
        }
        let client = client_id_of(&self.conns, &self.sessions, conn);
        let client = client.as_ref().map_or("-", |c| c.as_str());
        for trace in traces {
            let payload_bytes = trace.spec.payload_bytes;
            trace.write(&publish_line(direction, client, line, None, payload_bytes));
        }
    }

    /// Marks `conn` as followed by the running traces that follow `identity`.
    fn follow(&mut self, conn: ConnId, client: &str, identity: Identity<'_>, ctx: &Ctx) {
        let traces = self.shared.links.traces.following(identity, ctx.now());
        let book = &mut self.figures.traces;
        if traces.is_empty() {
            book.by_conn.remove(&conn);
        } else {
            let traced = TracedConn {
                client: client.into(),
                traces,
            };
            book.by_conn.insert(conn, traced);
        }
        book.settle(self.shared.links.traces.topic_traces());
    }

    /// Marks every connection again when a trace started or stopped (once per turn, one load).
    pub(super) fn refresh_traces(&mut self, ctx: &Ctx) {
        let traces = &self.shared.links.traces;
        let generation = traces.generation();
        if generation == self.figures.traces.generation {
            return;
        }
        self.figures.traces.generation = generation;
        self.figures.traces.by_conn.clear();
        self.figures.traces.settle(traces.topic_traces());
        if !traces.identity_traces() {
            return;
        }
        let connected: Vec<ConnId> = self.conns.iter().map(|(conn, _)| conn).collect();
        for conn in connected {
            let Some(client_id) = client_id_of(&self.conns, &self.sessions, conn) else {
                continue;
            };
            let username = self
                .auth
                .acl_clients
                .get(&conn)
                .and_then(|c| c.username.clone());
            let identity = Identity {
                client_id: Some(client_id.as_str()),
                username: username.as_ref().map(|u| u.as_str()),
                address: ctx.peer_addr(conn).ok().map(|a| a.ip()),
            };
            self.follow(conn, client_id.as_str(), identity, ctx);
        }
    }
}
