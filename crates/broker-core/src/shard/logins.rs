//! [`Logins`]: CONNECTs waiting for the authentication backends, and grants not yet attached to their connection; `login.rs` asks and answers.

use access::gatekeeper::grant::ClientGrant;
use codec::{Connect, ReasonCode};
use ring_runtime::ConnId;

/// What the shard can say about a CONNECT's credentials now.
pub(super) enum Judgement {
    /// Let it in, with what its login grants.
    Admit(Box<ClientGrant>),
    /// Refuse it with this CONNACK reason.
    Refuse(ReasonCode),
    /// A worker asks the backends (the job's token); the CONNECT waits.
    Wait(u64),
}

/// A CONNECT whose credentials a worker is judging.
pub(super) struct PendingLogin {
    pub(super) token: u64,
    pub(super) connect: Connect,
}

/// The shard's logins in progress and the grants of clients not yet attached.
#[derive(Default)]
pub(super) struct Logins {
    pub(super) pending: super::FastMap<ConnId, PendingLogin>,
    /// Grants of admitted CONNECTs, until `complete_connect` hands them to the ACL state.
    pub(super) grants: super::FastMap<ConnId, ClientGrant>,
    /// Disconnect timers of clients whose credentials expire.
    pub(super) expiries: super::FastMap<ConnId, super::ArmedTimer>,
    pub(super) next_token: u64,
}
