//! The protocol handler a shard drives: the only way the runtime talks to its user.

use std::io;
use std::net::SocketAddr;

use bytes::Bytes;

pub use crate::close_reason::CloseReason;
use crate::ctx::ShardCtx;
use crate::ids::{ConnId, TimerId};
use crate::layer::LayerError;

/// A shard's protocol logic. One instance per shard, built on the shard's own thread by the
/// factory given to [`crate::Runtime::start`], so it need not be `Send`.
///
/// Callbacks of one turn run in this order: I/O events (`on_accept`, `on_connected`,
/// `on_data`, `on_read_closed`), then expired timers (`on_timer`), then mailbox messages
/// (`on_messages`), then [`Handler::on_turn_end`]; after it the runtime sends, per connection,
/// everything queued this turn in one writev/sendmsg, and reports finished closes
/// (`on_closed`). A virtual connection's callbacks come from its datagram driver: with the I/O
/// events for what it received, after the timers for what its deadline produced, and at the
/// next turn's start for what it did during the apply step.
pub trait Handler: 'static {
    /// What other shards (and other threads) post to this shard.
    type Message: Send + 'static;

    /// A listener accepted `conn` (already `TCP_NODELAY`, owned by this shard), or a datagram
    /// endpoint's driver opened it (a virtual connection: see [`crate::DatagramDriver`]).
    fn on_accept(&mut self, ctx: &mut ShardCtx<Self::Message>, conn: ConnId, peer: SocketAddr);

    /// An outbound connect from [`ShardCtx::connect`] finished. On `Err` the id is already
    /// released and no `on_closed` follows.
    fn on_connected(
        &mut self,
        ctx: &mut ShardCtx<Self::Message>,
        conn: ConnId,
        result: io::Result<()>,
    ) {
        let _ = (ctx, conn, result);
    }

    /// Bytes arrived. `data` is the handler's to keep (copied once out of the receive buffer,
    /// which went straight back to the buffer ring).
    fn on_data(&mut self, ctx: &mut ShardCtx<Self::Message>, conn: ConnId, data: Bytes);

    /// The connection's [`crate::StreamLayer`] failed (a TLS handshake refused, bad WebSocket
    /// framing): what the layer had to send back (an alert) is queued. The default closes
    /// gracefully.
    fn on_layer_error(
        &mut self,
        ctx: &mut ShardCtx<Self::Message>,
        conn: ConnId,
        error: LayerError,
    ) {
        let _ = error;
        ctx.close(conn);
    }

    /// The peer sent FIN: no more data will come, but the connection can still send (half
    /// close). The default closes gracefully after queued frames are sent.
    fn on_read_closed(&mut self, ctx: &mut ShardCtx<Self::Message>, conn: ConnId) {
        ctx.close(conn);
    }

    /// The connection is gone and its id is stale from now on. Called exactly once per
    /// accepted or successfully connected connection.
    fn on_closed(&mut self, ctx: &mut ShardCtx<Self::Message>, conn: ConnId, reason: CloseReason) {
        let _ = (ctx, conn, reason);
    }

    /// A timer armed with [`ShardCtx::arm_timer`] expired; `timer` is stale from now on.
    fn on_timer(&mut self, ctx: &mut ShardCtx<Self::Message>, timer: TimerId, key: u64) {
        let _ = (ctx, timer, key);
    }

    /// A batch of messages posted to this shard, in order per sender.
    fn on_messages(&mut self, ctx: &mut ShardCtx<Self::Message>, messages: Vec<Self::Message>) {
        let _ = (ctx, messages);
    }

    /// Input fences this shard asked for ([`ShardCtx::input_fence`]) have passed: check the
    /// ones waited for with [`ShardCtx::input_fence_passed`]. Called at the start of a turn,
    /// before its input is handed over.
    fn on_input_fences_passed(&mut self, ctx: &mut ShardCtx<Self::Message>) {
        let _ = ctx;
    }

    /// End of the turn: flush per-turn work here; the runtime writes right after.
    fn on_turn_end(&mut self, ctx: &mut ShardCtx<Self::Message>) {
        let _ = ctx;
    }

    /// Graceful shutdown started: listeners are closed; queue last frames here. Afterwards
    /// every connection is closed gracefully (bounded by `drain_timeout`).
    fn on_shutdown(&mut self, ctx: &mut ShardCtx<Self::Message>) {
        let _ = ctx;
    }
}
