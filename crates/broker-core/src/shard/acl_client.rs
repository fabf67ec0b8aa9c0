//! [`AclClient`]: a connected client's identity and grant while an ACL is configured, and the [`TopicVerdict`] a topic check comes to; `acl.rs` asks the rules.

use access::gatekeeper::grant::ClientGrant;
use codec::MqttStr;

/// What topic checks need to know about one connected client.
pub(crate) struct AclClient {
    pub(super) username: Option<MqttStr>,
    /// Some subscription is only partly readable: messages are checked as they leave.
    pub(super) read_filtered: bool,
    /// The rules' epoch it connected under: once the rules change, its messages are checked
    /// as they leave too.
    pub(super) rules_epoch: u64,
    /// What its login granted, when that restricts it.
    pub(super) grant: Option<Box<ClientGrant>>,
}

/// The answer to one topic check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TopicVerdict {
    Allowed,
    Refused,
    /// Only the backend can tell, and its answer is not cached.
    Ask,
}
