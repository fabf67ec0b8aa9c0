//! [`TopicWaits`]: packets parked while a backend answers their topic checks; `topic_checks.rs` asks and resumes them.

use access::backend::{AclRequest, TopicAccess};
use codec::Packet;
use ring_runtime::ConnId;

/// Packets waiting for topic answers, one per connection at most (the connection is parked).
#[derive(Default)]
pub(super) struct TopicWaits {
    pub(super) waiting: super::FastMap<ConnId, WaitingPacket>,
    /// Answers a worker just gave, consulted while the packet they were for is handled.
    pub(super) fresh: Vec<(String, TopicAccess, bool)>,
    pub(super) next_token: u64,
    /// CONNECTs waiting for their will's answer, and the rules of wills held (`will_check.rs`).
    pub(super) wills: super::will_checks::WillChecks,
}

pub(super) struct WaitingPacket {
    pub(super) token: u64,
    pub(super) packet: Packet,
    pub(super) requests: Vec<AclRequest>,
}

impl TopicWaits {
    /// Whether `conn` has a packet waiting for topic answers.
    pub(super) fn waits_for_topics(&self, conn: ConnId) -> bool {
        !self.waiting.is_empty() && self.waiting.contains_key(&conn)
    }
}
