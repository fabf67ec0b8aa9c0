//! Connections with a [`crate::StreamLayer`]: received bytes go through the layer before the
//! handler sees them; the handler's frames of a turn go through it in the apply step.

use bytes::Bytes;

use super::Shard;
use crate::backend::Backend;
use crate::conn::CloseMode;
use crate::handler::{CloseReason, Handler};
use crate::ids::ConnId;
use crate::layer::LayerState;

impl<H: Handler, B: Backend> Shard<H, B> {
    /// Bytes arrived on a layered connection: the layer's replies are queued for the socket,
    /// its plain output goes to the handler, and an end or error inside the layer is reported.
    pub(super) fn receive_layered(&mut self, conn: ConnId, data: Bytes) {
        let ctx = &mut self.ctx;
        let Some(result) = ctx.layers.receive(conn, data) else {
            return;
        };
        let (plain, wire) = ctx.layers.take_output();
        if let Some(wire) = wire
            && let Some(record) = ctx.conns.get_mut(conn)
        {
            // Never coalesced: the layer's bytes leave as they are, in order.
            record.send.push(wire, 0);
            ctx.conns.mark_dirty(conn);
        }
        if let Some(plain) = plain {
            self.handler.on_data(ctx, conn, plain);
        }
        let usable = ctx.conns.get(conn).is_some_and(|c| c.is_usable());
        match result {
            Ok(LayerState::Open) => {}
            Ok(LayerState::PeerClosed) => {
                if let Some(record) = ctx.conns.get_mut(conn) {
                    record.io.read_done = true;
                }
                if usable {
                    self.handler.on_read_closed(ctx, conn);
                }
            }
            Err(error) if usable => self.handler.on_layer_error(ctx, conn, error),
            Err(_) => {}
        }
    }

    /// Bytes the handler received before it set a layer go through it now
    /// ([`crate::ShardCtx::receive_through_layer`]).
    pub(super) fn receive_layer_input(&mut self) {
        if self.ctx.requests.layer_input.is_empty() {
            return;
        }
        for (conn, data) in std::mem::take(&mut self.ctx.requests.layer_input) {
            let layered = self.ctx.conns.get(conn);
            if layered.is_some_and(|record| record.is_usable() && record.layered) {
                self.receive_layered(conn, data);
            }
        }
    }

    /// A write is about to start: runs what the handler queued (and, on a graceful close, the
    /// layer's goodbye) through the layer into the socket's queue. A layer that fails here
    /// aborts its connection.
    pub(super) fn encode_layered(&mut self, id: ConnId) {
        let ctx = &mut self.ctx;
        let Some(conn) = ctx.conns.get_mut(id) else {
            return;
        };
        if !conn.layered {
            return;
        }
        if conn.close == Some(CloseMode::Abort) {
            if let Some(plain) = ctx.layers.plain_queue(id) {
                plain.clear();
            }
            return;
        }
        let closing = conn.close == Some(CloseMode::Graceful);
        match ctx.layers.encode(id, closing) {
            None => {}
            Some(Ok(wire)) => conn.send.push(wire, 0),
            Some(Err(error)) => {
                tracing::debug!(conn = id.index(), %error, "stream layer failed to encode");
                let kind = std::io::ErrorKind::InvalidData;
                ctx.request_close(id, CloseMode::Abort, Some(CloseReason::Error { kind }));
            }
        }
    }
}
