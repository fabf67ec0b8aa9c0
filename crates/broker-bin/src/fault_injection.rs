//! Test-only fault injection, compiled into debug builds only (`cfg(debug_assertions)`): a
//! release build has none of it.
//!
//! `RINGMQ_FAULT_PANIC_SHARD=<index>` makes shard `<index>` panic on its first accepted
//! connection, so a black-box test can check that the broker notices a dead shard and stops
//! (tests/broker/shard_exit.rs). Never set it outside tests.

use std::io;
use std::net::SocketAddr;

use bytes::Bytes;
use ring_runtime::{CloseReason, ConnId, Handler, LayerError, ShardCtx, ShardId, TimerId};

/// The environment variable naming the shard that panics on its first accept.
pub const FAULT_PANIC_SHARD_ENV: &str = "RINGMQ_FAULT_PANIC_SHARD";

/// The panic message of an injected fault.
pub const FAULT_PANIC_MESSAGE: &str = "injected fault (RINGMQ_FAULT_PANIC_SHARD)";

/// Wraps a shard's handler; panics on the first accept when the variable names this shard.
pub struct FaultInjected<H> {
    inner: H,
    panic_on_accept: bool,
}

impl<H> FaultInjected<H> {
    /// Reads [`FAULT_PANIC_SHARD_ENV`] for `shard`.
    pub fn new(inner: H, shard: ShardId) -> Self {
        let panic_on_accept = std::env::var(FAULT_PANIC_SHARD_ENV)
            .ok()
            .and_then(|value| value.trim().parse::<usize>().ok())
            .is_some_and(|index| index == shard.index());
        Self {
            inner,
            panic_on_accept,
        }
    }
}

impl<H: Handler> Handler for FaultInjected<H> {
    type Message = H::Message;

    fn on_accept(&mut self, ctx: &mut ShardCtx<H::Message>, conn: ConnId, peer: SocketAddr) {
        if self.panic_on_accept {
            panic!("{FAULT_PANIC_MESSAGE}");
        }
        self.inner.on_accept(ctx, conn, peer);
    }

    fn on_connected(&mut self, ctx: &mut ShardCtx<H::Message>, conn: ConnId, r: io::Result<()>) {
        self.inner.on_connected(ctx, conn, r);
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<H::Message>, conn: ConnId, data: Bytes) {
        self.inner.on_data(ctx, conn, data);
    }

    fn on_layer_error(&mut self, ctx: &mut ShardCtx<H::Message>, conn: ConnId, e: LayerError) {
        self.inner.on_layer_error(ctx, conn, e);
    }

    fn on_read_closed(&mut self, ctx: &mut ShardCtx<H::Message>, conn: ConnId) {
        self.inner.on_read_closed(ctx, conn);
    }

    fn on_closed(&mut self, ctx: &mut ShardCtx<H::Message>, conn: ConnId, reason: CloseReason) {
        self.inner.on_closed(ctx, conn, reason);
    }

    fn on_timer(&mut self, ctx: &mut ShardCtx<H::Message>, timer: TimerId, key: u64) {
        self.inner.on_timer(ctx, timer, key);
    }

    fn on_messages(&mut self, ctx: &mut ShardCtx<H::Message>, messages: Vec<H::Message>) {
        self.inner.on_messages(ctx, messages);
    }

    fn on_input_fences_passed(&mut self, ctx: &mut ShardCtx<H::Message>) {
        self.inner.on_input_fences_passed(ctx);
    }

    fn on_turn_end(&mut self, ctx: &mut ShardCtx<H::Message>) {
        self.inner.on_turn_end(ctx);
    }

    fn on_shutdown(&mut self, ctx: &mut ShardCtx<H::Message>) {
        self.inner.on_shutdown(ctx);
    }
}
