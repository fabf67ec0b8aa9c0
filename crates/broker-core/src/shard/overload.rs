//! Overload mode at this shard's door (`[overload]`): while the broker's resident memory is
//! above `overload.memory_high_bytes` a new connection is closed as soon as it is accepted,
//! before any MQTT is read, and counted; open connections are served as before. The state and
//! the memory readings are shared by all shards (`crate::abuse`).

use std::net::SocketAddr;

use ring_runtime::ConnId;
use tracing::debug;

use super::Ctx;
use crate::metrics::ShardCounters;
use crate::shared::Shared;

/// Whether overload mode refuses the connection `conn` just accepted from `peer` (it is
/// then aborted).
pub(super) fn refuse_in_overload(
    shared: &Shared,
    counters: &ShardCounters,
    ctx: &mut Ctx,
    conn: ConnId,
    peer: SocketAddr,
) -> bool {
    if !shared
        .door
        .abuse
        .refuses_connections(shared.time.since_start(ctx.now()))
    {
        return false;
    }
    ShardCounters::add(&counters.refused_overload, 1);
    debug!(%peer, "connection refused at accept: overload mode");
    ctx.abort(conn);
    true
}
