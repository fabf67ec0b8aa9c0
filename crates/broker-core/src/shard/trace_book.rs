//! [`TraceBook`]: which of this shard's connections running traces follow (`trace.rs` marks
//! them), and the lines their packets write.

use std::sync::Arc;

use codec::Packet;
use ring_runtime::ConnId;

use super::aliases::FastMap;
use crate::trace::{Direction, Trace, packet_line};

/// The connections of this shard that running traces follow.
#[derive(Default)]
pub(super) struct TraceBook {
    /// The traces' generation this shard marked its connections under.
    pub(super) generation: u64,
    /// Whether any trace may want a packet of this shard: a connection followed, or a topic
    /// trace running (set when the generation moves). A PUBLISH copy looks at this alone.
    pub(super) active: bool,
    pub(super) by_conn: FastMap<ConnId, TracedConn>,
}

pub(super) struct TracedConn {
    /// The client id its lines name.
    pub(super) client: Box<str>,
    pub(super) traces: Vec<Arc<Trace>>,
}

impl TraceBook {
    /// Writes `packet`'s line to the traces following `conn`, if any.
    #[inline]
    pub(super) fn packet(&self, conn: ConnId, direction: Direction, packet: &Packet) {
        if self.by_conn.is_empty() {
            return;
        }
        if let Some(traced) = self.by_conn.get(&conn) {
            for trace in &traced.traces {
                let payload_bytes = trace.spec.payload_bytes;
                trace.write(&packet_line(
                    direction,
                    &traced.client,
                    packet,
                    payload_bytes,
                ));
            }
        }
    }

    pub(super) fn forget(&mut self, conn: ConnId) {
        if !self.by_conn.is_empty() {
            self.by_conn.remove(&conn);
        }
    }

    /// Sets [`Self::active`] after the followed connections or the topic traces changed.
    pub(super) fn settle(&mut self, topic_traces: bool) {
        self.active = topic_traces || !self.by_conn.is_empty();
    }
}
