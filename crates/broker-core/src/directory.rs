//! The session directory's entries: where each client's session lives now, and the claim a
//! CONNECT holds on it while the session moves between shards; and how a subscriber key names
//! the shard it was handed out on. The directory itself is `Shared::directory.sessions`, in the
//! [`SessionDirectory`](crate::shared_parts::SessionDirectory) of `shared_parts.rs` (which also
//! hands out subscriber keys and claim ids); these types are what shards, takeovers and
//! recovery exchange about it.

use std::sync::Arc;

use codec::MqttStr;
use ring_runtime::ShardId;
use router::SubscriberId;
use session_store::storage::StoredOwner;

/// Where a session lives now (32 bytes: the directory keeps one per session).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLocation {
    /// The shard holding (or about to hold) the session.
    pub shard: ShardId,
    /// The session's subscriber key.
    pub subscriber: SubscriberId,
    /// The latest connection's claim on the session: a takeover request names the claim it
    /// supersedes, as one shard may hold several claims for one client during a burst of
    /// reconnects.
    pub claim: ClaimId,
    /// The identity the session belongs to (`auth.client_id_owner_check`) in two fields, so
    /// that the flag takes the record's padding: the user's name, and whether it is bound at
    /// all (unbound: no name either).
    user: Option<Arc<str>>,
    bound: bool,
}

impl SessionLocation {
    /// The location of a session held by `shard` under `claim`, belonging to `owner`.
    pub fn new(
        (shard, subscriber): (ShardId, SubscriberId),
        claim: ClaimId,
        owner: &SessionOwner,
    ) -> Self {
        let mut location = Self {
            shard,
            subscriber,
            claim,
            user: None,
            bound: false,
        };
        location.set_owner(owner);
        location
    }

    /// The identity the session belongs to.
    pub fn owner(&self) -> SessionOwner {
        match (&self.user, self.bound) {
            (Some(name), _) => SessionOwner::User(Arc::clone(name)),
            (None, true) => SessionOwner::Anonymous,
            (None, false) => SessionOwner::Unbound,
        }
    }

    /// The session now belongs to `owner`.
    pub fn set_owner(&mut self, owner: &SessionOwner) {
        (self.user, self.bound) = match owner {
            SessionOwner::Unbound => (None, false),
            SessionOwner::Anonymous => (None, true),
            SessionOwner::User(name) => (Some(Arc::clone(name)), true),
        };
    }
}

/// The identity a session belongs to: the CONNECT username after authentication (with a
/// listener's `identity_as_username`, the client certificate's name), or none. A stored
/// session's owner is stored with it (`SessionWrite::SessionSaved`) and comes back at start
/// (`deal.rs`); only a session stored before owners were recorded comes back `Unbound`, and the
/// first identity that connects to it takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionOwner {
    /// Recovered from a store that did not record its owner: not bound yet.
    Unbound,
    /// Created by a client without a username.
    Anonymous,
    /// Created by this user.
    User(Arc<str>),
}

impl SessionOwner {
    /// The identity of a client that sent `username`.
    pub fn of(username: Option<&str>) -> Self {
        username.map_or(Self::Anonymous, |name| Self::User(Arc::from(name)))
    }

    /// Whether a client of identity `other` may take this session over when owners are
    /// checked: the same identity, or any identity while the session is unbound.
    pub fn admits(&self, other: &SessionOwner) -> bool {
        *self == Self::Unbound || self == other
    }

    /// This owner as the store records it.
    pub fn to_stored(&self) -> StoredOwner {
        match self {
            Self::Unbound => StoredOwner::Unbound,
            Self::Anonymous => StoredOwner::Anonymous,
            // Made from a CONNECT's username or a certificate name checked as one.
            Self::User(name) => StoredOwner::User(
                MqttStr::try_from(&**name).expect("invariant: a username is an MQTT string"),
            ),
        }
    }

    /// The owner the store recorded for a session.
    pub fn from_stored(stored: &StoredOwner) -> Self {
        match stored {
            StoredOwner::Unbound => Self::Unbound,
            StoredOwner::Anonymous => Self::Anonymous,
            StoredOwner::User(name) => Self::User(Arc::from(name.as_str())),
        }
    }
}

/// One CONNECT's claim on a client's session, unique among claims still in progress (ids wrap
/// after 2^32 claims; a claim is in progress for the time a session takes to move).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClaimId(pub u32);

/// The low bits of a subscriber key that name the shard it was handed out on (shard ids are
/// 16-bit).
pub const BIRTH_SHARD_BITS: u32 = 16;

/// The shard a subscriber key was handed out on (`SessionDirectory::new_subscriber`).
pub fn birth_shard(subscriber: SubscriberId) -> ShardId {
    ShardId::new((subscriber.0 & ((1 << BIRTH_SHARD_BITS) - 1)) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_keeps_every_owner_in_32_bytes() {
        assert!(std::mem::size_of::<SessionLocation>() <= 32);
        for owner in [
            SessionOwner::Unbound,
            SessionOwner::Anonymous,
            SessionOwner::of(Some("alice")),
        ] {
            let at = (ShardId::new(1), SubscriberId(7));
            let mut location = SessionLocation::new(at, ClaimId(3), &SessionOwner::Anonymous);
            location.set_owner(&owner);
            assert_eq!(location.owner(), owner);
        }
    }

    #[test]
    fn every_owner_comes_back_from_its_stored_form() {
        for owner in [
            SessionOwner::Unbound,
            SessionOwner::Anonymous,
            SessionOwner::of(Some("alice")),
        ] {
            assert_eq!(SessionOwner::from_stored(&owner.to_stored()), owner);
        }
    }
}
