//! A connection's TLS or WebSocket layer: set at accept, its failures logged with the peer,
//! and the client certificate's identity at CONNECT.

use std::net::SocketAddr;

use codec::{Connect, MqttStr, ReasonCode};
use ring_runtime::{ConnId, LayerError, PeerIdentity};
use tracing::debug;

use super::lifecycle::LifecycleLines;
use super::{BrokerShard, Ctx};
use crate::metrics::{Listener, ShardCounters};
use transport::{MqttTransport, Transports};

impl BrokerShard {
    /// The layer gave up (failed handshake, plain MQTT on a TLS port, bad upgrade, bad
    /// framing, more held than its bounds allow): logged at debug with the peer, then closed.
    /// A layer over its bounds is counted with the partial packets over the budget. A client
    /// certificate refused for a cause the operator can fix (an X.509 v1 certificate) is
    /// logged at warn instead, within the lifecycle lines' bound.
    pub(super) fn transport_failed(&mut self, ctx: &mut Ctx, conn: ConnId, error: LayerError) {
        let transport = ctx.layer_mut::<MqttTransport>(conn);
        let peer = transport.as_ref().map(|t| t.peer());
        let refusal = transport.as_ref().and_then(|t| t.certificate_refusal());
        if transport.is_some_and(|t| t.held_over().is_some()) {
            ShardCounters::add(&self.figures.counters().partial_frame_closed, 1);
        }
        let mut lines = LifecycleLines {
            shared: &self.shared,
            timers: &mut self.timers,
            shard: self.id,
        };
        let warned = match (peer, refusal) {
            (Some(peer), Some(refusal)) => lines.log_certificate_refused(ctx, peer, refusal),
            _ => false,
        };
        if !warned {
            match peer {
                Some(peer) => debug!(%peer, %error, "transport error: closing"),
                None => debug!(%error, "transport error: closing"),
            }
        }
        self.wire().close_connection(ctx, conn);
    }
}

/// The address of the listener that accepted `conn`: `Ok(None)` when every listener is plain
/// TCP (no need to ask); `Err` (logged) when the socket has none.
pub(super) fn listener_address(
    transports: &Transports,
    ctx: &Ctx,
    conn: ConnId,
    peer: SocketAddr,
) -> Result<Option<SocketAddr>, ()> {
    if !transports.any() {
        return Ok(None);
    }
    ctx.local_addr(conn).map(Some).map_err(|error| {
        debug!(%peer, %error, "accepted connection has no local address: closing");
    })
}

/// Gives `conn` the layer of the listener at `local` (`None`: plain TCP only) for the client
/// at `peer`; the listener's kind, or `None` when the connection cannot be served (logged).
pub(super) fn add_transport(
    transports: &Transports,
    ctx: &mut Ctx,
    conn: ConnId,
    local: Option<SocketAddr>,
    peer: SocketAddr,
) -> Option<Listener> {
    let Some(local) = local else {
        return Some(Listener::Tcp);
    };
    match transports.layer_for(local, peer) {
        None => Some(Listener::Tcp),
        Some(Ok(layer)) => {
            let kind = Listener::from(layer.kind());
            ctx.set_layer(conn, Box::new(layer));
            Some(kind)
        }
        Some(Err(error)) => {
            debug!(%peer, %local, %error, "cannot serve this connection: closing");
            None
        }
    }
}

/// On a listener with `identity_as_username`, the verified client certificate's Common
/// Name replaces the CONNECT's username (`Ok(true)`); without one the CONNECT is refused.
/// `Ok(false)` on other listeners.
pub(super) fn apply_certificate_identity(
    ctx: &mut Ctx,
    conn: ConnId,
    connect: &mut Connect,
) -> Result<bool, ReasonCode> {
    if ctx.is_virtual(conn) {
        return quic_certificate_identity(ctx, conn, connect);
    }
    let Some(transport) = ctx.layer_mut::<MqttTransport>(conn) else {
        return Ok(false);
    };
    let Some(identity) = transport.username_from_certificate() else {
        return Ok(false);
    };
    let peer = transport.peer();
    let Ok(name) = identity else {
        debug!(%peer, "no client certificate Common Name to use as the username: refused");
        return Err(ReasonCode::NotAuthorized);
    };
    let username =
        MqttStr::from_bytes(name.into_bytes().into()).map_err(|_| ReasonCode::NotAuthorized)?;
    connect.username = Some(username);
    Ok(true)
}

/// [`apply_certificate_identity`] for a QUIC connection: the name its driver read from the
/// verified client certificate (set only on a listener with `identity_as_username`).
fn quic_certificate_identity(
    ctx: &Ctx,
    conn: ConnId,
    connect: &mut Connect,
) -> Result<bool, ReasonCode> {
    let name = match ctx.peer_identity(conn) {
        None => return Ok(false),
        Some(PeerIdentity::Named(name)) => name.to_string(),
        Some(PeerIdentity::Unnamed) => {
            debug!("no client certificate Common Name to use as the username (QUIC): refused");
            return Err(ReasonCode::NotAuthorized);
        }
    };
    let username =
        MqttStr::from_bytes(name.into_bytes().into()).map_err(|_| ReasonCode::NotAuthorized)?;
    connect.username = Some(username);
    Ok(true)
}
