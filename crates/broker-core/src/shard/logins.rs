//! [`Logins`]: CONNECTs waiting for the authentication backends, and grants not yet attached to their connection; `login.rs` asks and answers.

use access::gatekeeper::grant::ClientGrant;
use codec::{Connect, Packet, ReasonCode};
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
    /// What it is charged to the pre-login budget ([`connect_bytes`]).
    pub(super) bytes: u64,
}

/// What a CONNECT held before its client is logged in is charged to the pre-login budget
/// (`limits.max_partial_frame_bytes`): its size on the wire (its will's payload, properties and
/// credentials included).
pub(super) fn connect_bytes(connect: &Connect) -> u64 {
    let packet = Packet::from(connect.clone());
    codec::encoded_len(&packet, connect.protocol).map_or(0, |len| len as u64)
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
