//! Connections on a listener that expects a PROXY protocol header (`proxy_protocol`): from a
//! balancer outside `listeners.proxy_trusted` they are refused at accept; otherwise the header
//! is read first, within the connect timeout, before TLS, WebSocket and MQTT. The client address
//! it names then stands for the connection's peer everywhere (`ShardCtx::set_peer_addr`): the
//! `[ip]` guard admits it (decided here, not at accept), the failed-login bans and the
//! authentication backends (the HTTP backend's `peer`) see it, and so do the lifecycle lines
//! and the admin API. A connection without a valid header is closed. Every
//! refusal here is counted under `ringmq_connects_refused_total{reason="proxy_protocol"}`.

use std::net::SocketAddr;

use bytes::Bytes;
use ring_runtime::ConnId;
use tracing::debug;
use transport::{ProxyHeader, ReadStep};

use super::transport::add_transport;
use super::{BrokerShard, Ctx};
use crate::metrics::{Listener, Refusal};

impl BrokerShard {
    /// At accept on a listener that expects a header: whether `peer` (the balancer) may send
    /// one; an untrusted one is counted and aborted.
    pub(super) fn proxy_source_trusted(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        peer: SocketAddr,
    ) -> bool {
        if self.shared.door.transports.trusts_proxy(peer) {
            return true;
        }
        debug!(%peer, "PROXY protocol header refused: not from listeners.proxy_trusted");
        self.figures.count_refusal(Refusal::ProxyProtocol);
        ctx.abort(conn);
        false
    }

    /// `conn`, accepted on `local`, waits for its header; the listener's kind.
    pub(super) fn await_proxy_header(&mut self, conn: ConnId, local: SocketAddr) -> Listener {
        let transports = &self.shared.door.transports;
        let reader = transports.proxy_reader();
        self.door.proxy_waits.insert(conn, (reader, local));
        Listener::from(transports.kind_at(local))
    }

    /// Bytes arrived on `conn`: what is left for the connection's next stage once its header
    /// is read (all of it when it waits for none); `None` while the header is incomplete, when
    /// it was refused, or when the rest went to the new TLS or WebSocket layer.
    pub(super) fn read_proxy_header(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        data: Bytes,
    ) -> Option<Bytes> {
        let Some((reader, _)) = self.door.proxy_waits.get_mut(&conn) else {
            return Some(data);
        };
        let step = reader.feed(data);
        if matches!(step, Ok(ReadStep::NeedMore)) {
            return None;
        }
        let (_, local) = self.door.proxy_waits.remove(&conn)?;
        match step {
            Ok(ReadStep::Done { header, rest }) => {
                self.proxy_header_read(ctx, conn, local, header, rest)
            }
            Ok(ReadStep::NeedMore) => None,
            Err(error) => {
                let peer = ctx.peer_addr(conn).ok();
                debug!(?peer, %error, "PROXY protocol header refused: closing");
                self.figures.count_refusal(Refusal::ProxyProtocol);
                ctx.abort(conn);
                None
            }
        }
    }

    /// The header is complete: its client becomes the peer, the `[ip]` guard judges it, and the
    /// connection gets its listener's layer (fed `rest`) or goes on as plain MQTT with `rest`.
    fn proxy_header_read(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        local: SocketAddr,
        header: ProxyHeader,
        rest: Bytes,
    ) -> Option<Bytes> {
        if let Some(client) = header.source() {
            ctx.set_peer_addr(conn, client);
        }
        let client = ctx.peer_addr(conn).ok()?;
        debug!(%client, version = ?header.version, "PROXY protocol header read");
        let guard = &self.shared.door.guard;
        let mark = self.door.admit_address(guard, ctx, conn, client)?;
        match self.conns.get_mut(&conn) {
            Some(connection) => connection.set_door_mark(mark),
            None => self.door.address_released(guard, conn, mark),
        }
        let transports = &self.shared.door.transports;
        let Some(listener) = add_transport(transports, ctx, conn, Some(local), client) else {
            ctx.abort(conn);
            return None;
        };
        if listener == Listener::Tcp {
            return (!rest.is_empty()).then_some(rest);
        }
        ctx.receive_through_layer(conn, rest);
        None
    }
}
