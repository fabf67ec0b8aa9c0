//! The ACL file (`auth.acl_file`, mosquitto's format) in force on this shard's connections:
//! PUBLISH needs write access, a SUBSCRIBE filter some read access, and every message sent on a
//! subscription the ACL only partly allows is checked for read access as it leaves.
//!
//! A connected client's identity (its username) is kept only while an ACL is configured; a
//! connection whose subscriptions are all fully readable is never checked per message.

use std::sync::Arc;

use codec::{MqttStr, ReasonCode};
use ring_runtime::ConnId;
use tracing::debug;

use super::BrokerShard;
use crate::access::{Access, AclFile, ClientIdentity, SubscribeScope};

/// What the ACL needs to know about one connected client.
pub(crate) struct AclClient {
    username: Option<MqttStr>,
    /// Some subscription is only partly readable: messages are checked as they leave.
    read_filtered: bool,
}

impl BrokerShard {
    fn acl(&self) -> Option<Arc<AclFile>> {
        self.shared.acl()
    }

    /// A client connected with `username`; `filters` are its session's subscriptions (a
    /// resumed session keeps them, and the rules may have changed since).
    pub(super) fn acl_connected<'a>(
        &mut self,
        conn: ConnId,
        client_id: &MqttStr,
        username: Option<MqttStr>,
        filters: impl Iterator<Item = &'a MqttStr>,
    ) {
        let Some(acl) = self.acl() else {
            return;
        };
        let identity = identity(client_id, username.as_ref());
        let read_filtered = filters
            .map(|filter| acl.subscribe_scope(&identity, unshared(filter.as_str())))
            .any(|scope| scope != SubscribeScope::All);
        let client = AclClient {
            username,
            read_filtered,
        };
        self.acl_clients.insert(conn, client);
    }

    pub(super) fn acl_closed(&mut self, conn: ConnId) {
        self.acl_clients.remove(&conn);
    }

    /// Whether `conn`'s client may publish to `topic`.
    pub(super) fn acl_allows_publish(
        &self,
        conn: ConnId,
        client_id: &MqttStr,
        topic: &str,
    ) -> bool {
        let Some(acl) = self.acl() else {
            return true;
        };
        let username = self
            .acl_clients
            .get(&conn)
            .and_then(|c| c.username.as_ref());
        let identity = identity(client_id, username);
        let allowed = acl.check(&identity, topic, Access::Write);
        if !allowed {
            debug!(topic, "PUBLISH refused by the ACL");
        }
        allowed
    }

    /// Whether `conn`'s client may subscribe to `filter`: refused when the ACL lets it read
    /// nothing the filter matches; partly readable filters make its deliveries checked.
    pub(super) fn acl_admits_subscription(
        &mut self,
        conn: ConnId,
        client_id: &MqttStr,
        filter: &str,
    ) -> Result<(), ReasonCode> {
        let Some(acl) = self.acl() else {
            return Ok(());
        };
        let Some(client) = self.acl_clients.get_mut(&conn) else {
            return Ok(());
        };
        let identity = identity(client_id, client.username.as_ref());
        match acl.subscribe_scope(&identity, unshared(filter)) {
            SubscribeScope::All => Ok(()),
            SubscribeScope::Some => {
                client.read_filtered = true;
                Ok(())
            }
            SubscribeScope::None => {
                debug!(filter, "SUBSCRIBE refused by the ACL");
                Err(ReasonCode::NotAuthorized)
            }
        }
    }

    /// Whether a message on `topic` may leave to `conn`: checked only for a client with a
    /// partly readable subscription.
    pub(super) fn acl_allows_delivery(&self, conn: ConnId, topic: &str) -> bool {
        if self.acl_clients.is_empty() {
            return true;
        }
        let Some(client) = self.acl_clients.get(&conn).filter(|c| c.read_filtered) else {
            return true;
        };
        let (Some(acl), Some(client_id)) = (self.acl(), self.client_id_of(conn)) else {
            return true;
        };
        let identity = identity(&client_id, client.username.as_ref());
        acl.check(&identity, topic, Access::Read)
    }
}

/// A filter without its `$share/<group>/` prefix: the topics a shared subscription matches.
fn unshared(filter: &str) -> &str {
    filter
        .strip_prefix("$share/")
        .and_then(|rest| rest.split_once('/'))
        .map_or(filter, |(_group, inner)| inner)
}

fn identity<'a>(client_id: &'a MqttStr, username: Option<&'a MqttStr>) -> ClientIdentity<'a> {
    ClientIdentity {
        client_id: client_id.as_str(),
        username: username.map(MqttStr::as_str),
    }
}
