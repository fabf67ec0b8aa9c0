//! The broker's binding of session-store's session model ([`session_store::Session`],
//! [`session_store::Sessions`]) to its own types: the router's subscriber key and filters, the
//! message copies of `message.rs`, the runtime's connection id and the shard's timers.

use ring_runtime::ConnId;
use router::{SubscriberId, SubscriptionFilter};
use session_store::SessionTypes;

use crate::message::Outgoing;
use crate::shard::ArmedTimer;

/// The broker's [`SessionTypes`].
#[derive(Debug)]
pub enum BrokerSession {}

impl SessionTypes for BrokerSession {
    type Subscriber = SubscriberId;
    type Filter = SubscriptionFilter;
    type Message = Outgoing;
    type Conn = ConnId;
    type Timer = ArmedTimer;
}

/// One session (112 bytes, boxed: mimalloc's 112-byte size class).
pub type Session = session_store::Session<BrokerSession>;
/// A shard's sessions, by client identifier and by subscriber key.
pub type Sessions = session_store::Sessions<BrokerSession>;
/// Where a shard's session sits, found once by its subscriber key (`Sessions::locate`).
pub type SessionAt = session_store::Located<SubscriberId>;
/// A subscription as the session remembers it.
pub type SessionSubscription = session_store::SessionSubscription<SubscriptionFilter>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_session_fits_a_112_byte_allocation() {
        assert!(std::mem::size_of::<Session>() <= 112);
    }
}
