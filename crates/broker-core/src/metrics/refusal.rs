//! [`Refusal`]: why a connection was refused before it logged in, the `reason` label of
//! `ringmq_connects_refused_total`: how an operator sees a brute-force attempt, a connection
//! flood or an identity conflict without reading the logs.

use codec::ReasonCode;

/// Why a connection was refused: at the door (no CONNACK) or with a CONNACK reason code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The socket was closed at accept: `connection.max_connections` were open.
    MaxConnections,
    /// Bad user name or password (0x86, 3.1.1 return code 4).
    BadCredentials,
    /// Not authorized (0x87, return code 5): the backends, a will's topic.
    NotAuthorized,
    /// Client identifier not valid (0x85, return code 2): another identity's session.
    ClientIdNotValid,
    /// Banned (0x8A): the `[ip]` guard's failed-login ban.
    Banned,
    /// Server busy or unavailable (0x89, 0x88, return code 3): overload, the cluster.
    Unavailable,
    /// Quota exceeded (0x97): `sessions.max_sessions`, a partial packet over its budget.
    QuotaExceeded,
    /// Any other reason (a malformed or unsupported CONNECT).
    Other,
    /// On a `proxy_protocol` listener: a connection from outside `listeners.proxy_trusted`,
    /// or without a valid PROXY protocol header (closed, no CONNACK).
    ProxyProtocol,
}

impl Refusal {
    /// Every refusal, in declaration order.
    pub const ALL: [Self; 9] = [
        Self::MaxConnections,
        Self::BadCredentials,
        Self::NotAuthorized,
        Self::ClientIdNotValid,
        Self::Banned,
        Self::Unavailable,
        Self::QuotaExceeded,
        Self::Other,
        Self::ProxyProtocol,
    ];

    /// The refusal a CONNACK with `reason` (a 5.0 reason code) stands for.
    pub fn of(reason: ReasonCode) -> Self {
        match reason {
            ReasonCode::BadUserNameOrPassword => Self::BadCredentials,
            ReasonCode::NotAuthorized => Self::NotAuthorized,
            ReasonCode::ClientIdentifierNotValid => Self::ClientIdNotValid,
            ReasonCode::Banned => Self::Banned,
            ReasonCode::ServerBusy | ReasonCode::ServerUnavailable => Self::Unavailable,
            ReasonCode::QuotaExceeded => Self::QuotaExceeded,
            _ => Self::Other,
        }
    }

    /// Its index in [`Self::ALL`] (declaration order).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The `reason` label value.
    pub fn label(self) -> &'static str {
        match self {
            Self::MaxConnections => "max_connections",
            Self::BadCredentials => "bad_credentials",
            Self::NotAuthorized => "not_authorized",
            Self::ClientIdNotValid => "client_id_not_valid",
            Self::Banned => "banned",
            Self::Unavailable => "unavailable",
            Self::QuotaExceeded => "quota_exceeded",
            Self::Other => "other",
            Self::ProxyProtocol => "proxy_protocol",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_follow_the_list() {
        for (i, refusal) in Refusal::ALL.iter().enumerate() {
            assert_eq!(refusal.index(), i);
        }
    }

    #[test]
    fn connack_reasons_map_to_their_refusal() {
        assert_eq!(
            Refusal::of(ReasonCode::BadUserNameOrPassword),
            Refusal::BadCredentials
        );
        assert_eq!(Refusal::of(ReasonCode::ServerBusy), Refusal::Unavailable);
        assert_eq!(Refusal::of(ReasonCode::ProtocolError), Refusal::Other);
    }
}
