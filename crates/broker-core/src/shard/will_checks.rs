//! [`WillChecks`]: CONNECTs whose will waits for a backend's topic answer, and the rules a will is judged by when it fires; `will_check.rs` asks and judges.

use super::FastMap;
use access::gatekeeper::grant::ClientGrant;
use codec::{Connect, MqttStr, ReasonCode};
use ring_runtime::ConnId;

/// What a will is judged by: its client's login, as a PUBLISH of that client would be.
pub(super) struct WillRules {
    pub(super) username: Option<MqttStr>,
    /// The grant, when it restricts the client (as `acl_connected` keeps it).
    pub(super) grant: Option<Box<ClientGrant>>,
    /// The backend's answer at CONNECT, when it was asked (it cannot be asked once the client
    /// is gone; a reload empties its cache).
    pub(super) remote: Option<bool>,
}

/// A CONNECT whose will topic its backend is being asked about.
pub(super) struct WaitingConnect {
    pub(super) token: u64,
    pub(super) connect: Connect,
    pub(super) grant: Box<ClientGrant>,
    pub(super) assigned: bool,
}

/// The shard's will checks in progress, and the rules of the wills it holds.
#[derive(Default)]
pub(super) struct WillChecks {
    pub(super) waiting: FastMap<ConnId, WaitingConnect>,
    /// Rules of admitted CONNECTs, until their session takes the will (`will_attached`).
    pub(super) admitted: FastMap<ConnId, WillRules>,
    /// Rules of the wills of this shard's sessions, by client id.
    pub(super) held: FastMap<MqttStr, WillRules>,
    pub(super) next_token: u64,
}

/// The outcome of a will check at CONNECT.
pub(super) enum WillCheck {
    Pass,
    Refuse(ReasonCode),
    /// The CONNECT waits for the backend's answer to this token (`will_answered`).
    Wait(u64),
}

impl WillChecks {
    /// The connection ended: a CONNECT waiting for its will's answer is forgotten.
    pub(super) fn will_check_closed(&mut self, conn: ConnId) {
        let wills = self;
        if !wills.waiting.is_empty() {
            wills.waiting.remove(&conn);
        }
        if !wills.admitted.is_empty() {
            wills.admitted.remove(&conn);
        }
    }
}
