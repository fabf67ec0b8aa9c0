//! The embedding hook for authentication and authorization: a program that runs the broker
//! as a library (`Broker::start_with_auth`) decides here, on the reactor, besides the configured
//! `[auth]` (password and ACL files, `auth.backends`). The binary uses [`AllowAll`]: its
//! decisions come from `[auth]` alone. A hook must answer at once (no network).

use codec::{Connect, ReasonCode};

/// What the broker asks before it accepts a connection, a subscription or a publish.
pub trait Authenticator: Send + Sync {
    /// Accepts or refuses a CONNECT (refusals carry the CONNACK reason, e.g. 0x86 or 0x87).
    fn authenticate(&self, connect: &Connect) -> Result<(), ReasonCode>;

    /// Whether `client_id` may subscribe to `filter` (refused: SUBACK 0x87 Not Authorized).
    fn authorize_subscribe(&self, client_id: &str, filter: &str) -> bool;

    /// Whether `client_id` may publish to `topic` (refused: PUBACK/PUBREC 0x87, message dropped).
    fn authorize_publish(&self, client_id: &str, topic: &str) -> bool;
}

/// The default hook: every client, subscription and publish is allowed.
#[derive(Debug, Default, Clone, Copy)]
pub struct AllowAll;

impl Authenticator for AllowAll {
    fn authenticate(&self, _connect: &Connect) -> Result<(), ReasonCode> {
        Ok(())
    }

    fn authorize_subscribe(&self, _client_id: &str, _filter: &str) -> bool {
        true
    }

    fn authorize_publish(&self, _client_id: &str, _topic: &str) -> bool {
        true
    }
}
