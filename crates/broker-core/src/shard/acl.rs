//! Topic access for connected clients: the ACL file (`auth.acl_file`, mosquitto's format) and
//! what the backend that let a client in says (its rules, its superuser flag, or answers to
//! topic checks, cached; see `topic_checks.rs`).
//!
//! A topic is allowed when any source that applies to the client allows it; a client no
//! source applies to is not restricted. PUBLISH needs write access, a SUBSCRIBE filter some
//! read access, and every message sent on a subscription only partly readable is checked for
//! read access as it leaves (against the ACL file and the client's rules; a subscription a
//! backend's topic check allowed is readable whole).
//!
//! A client's state is kept only while something restricts it; a connection whose
//! subscriptions are all fully readable is never checked per message.

use codec::{MqttStr, ReasonCode};
use ring_runtime::ConnId;
use tracing::debug;

use super::acl_client::{AclClient, TopicVerdict, anonymous, identity, write_verdict};
use super::parts::AuthWaits;
use crate::metrics::ShardCounters;
use crate::shared_parts::AccessControl;
use access::backend::TopicAccess;
use access::gatekeeper::grant::ClientGrant;
use access::{Access, SubscribeScope};

impl AuthWaits {
    /// A client connected with `username` and `grant`; `filters` are its session's
    /// subscriptions (a resumed session keeps them, and the rules may have changed since).
    pub(super) fn acl_connected<'a>(
        &mut self,
        control: &AccessControl,
        conn: ConnId,
        client_id: &MqttStr,
        username: Option<MqttStr>,
        grant: Option<ClientGrant>,
        filters: impl Iterator<Item = &'a MqttStr>,
    ) {
        let grant = grant.filter(ClientGrant::restricts).map(Box::new);
        let acl = control.acl();
        if acl.is_none() && grant.is_none() {
            return;
        }
        let mut client = AclClient {
            username,
            read_filtered: false,
            rules_epoch: control.rules_epoch(),
            grant,
        };
        client.read_filtered = filters
            .map(|filter| client.local_scope(acl.as_deref(), client_id, unshared(filter.as_str())))
            .any(|scope| scope != Some(SubscribeScope::All) && scope.is_some());
        self.acl_clients.insert(conn, client);
    }

    /// Whether `conn`'s client may publish to `topic`.
    pub(super) fn acl_allows_publish(
        &self,
        control: &AccessControl,
        conn: ConnId,
        client_id: &MqttStr,
        topic: &str,
    ) -> bool {
        let allowed =
            self.publish_verdict(control, conn, client_id, topic) == TopicVerdict::Allowed;
        if !allowed {
            debug!(topic, "PUBLISH refused by the ACL");
        }
        allowed
    }

    /// Whether `conn`'s client may publish to `topic`, or whether its backend must be asked.
    pub(super) fn publish_verdict(
        &self,
        control: &AccessControl,
        conn: ConnId,
        client_id: &MqttStr,
        topic: &str,
    ) -> TopicVerdict {
        let file = control.acl();
        let Some(client) = self.acl_clients.get(&conn) else {
            return if file
                .is_some_and(|acl| !acl.check(&anonymous(client_id), topic, Access::Write))
            {
                TopicVerdict::Refused
            } else {
                TopicVerdict::Allowed
            };
        };
        let remote = || self.remote_answer(control, client_id, client, topic, TopicAccess::Publish);
        let (username, grant) = (client.username.as_ref(), client.grant.as_deref());
        write_verdict(
            control.acl().as_deref(),
            client_id,
            username,
            grant,
            topic,
            remote,
        )
    }

    /// Whether `conn`'s client may subscribe to `filter`: refused when nothing lets it read
    /// what the filter matches; partly readable filters make its deliveries checked.
    pub(super) fn acl_admits_subscription(
        &mut self,
        control: &AccessControl,
        conn: ConnId,
        client_id: &MqttStr,
        filter: &str,
    ) -> Result<(), ReasonCode> {
        match self.subscribe_verdict(control, conn, client_id, filter) {
            (TopicVerdict::Allowed, filtered) => {
                if filtered && let Some(client) = self.acl_clients.get_mut(&conn) {
                    client.read_filtered = true;
                }
                Ok(())
            }
            (TopicVerdict::Refused | TopicVerdict::Ask, _) => {
                debug!(filter, "SUBSCRIBE refused by the ACL");
                Err(ReasonCode::NotAuthorized)
            }
        }
    }

    /// Whether `conn`'s client may subscribe to `filter`, and whether its deliveries must be
    /// checked one by one.
    pub(super) fn subscribe_verdict(
        &self,
        control: &AccessControl,
        conn: ConnId,
        client_id: &MqttStr,
        filter: &str,
    ) -> (TopicVerdict, bool) {
        let Some(client) = self.acl_clients.get(&conn) else {
            return (TopicVerdict::Allowed, false);
        };
        let grant = client.grant.as_deref();
        if grant.is_some_and(|g| g.superuser) {
            return (TopicVerdict::Allowed, false);
        }
        let scope = client.local_scope(control.acl().as_deref(), client_id, unshared(filter));
        if scope == Some(SubscribeScope::All) {
            return (TopicVerdict::Allowed, false);
        }
        if grant.is_some_and(|g| g.remote_topics) {
            match self.remote_answer(control, client_id, client, filter, TopicAccess::Subscribe) {
                Some(true) => return (TopicVerdict::Allowed, false),
                Some(false) => {}
                None => return (TopicVerdict::Ask, false),
            }
        }
        match scope {
            Some(SubscribeScope::Some) => (TopicVerdict::Allowed, true),
            None if !grant.is_some_and(|g| g.remote_topics) => (TopicVerdict::Allowed, false),
            _ => (TopicVerdict::Refused, false),
        }
    }

    /// Whether a message on `topic` may leave to `conn`: checked only for a client with a
    /// partly readable subscription, or one that connected before the ACL file was last read
    /// (its subscriptions were admitted under rules no longer in force; mosquitto checks every
    /// delivery against the ACL in force). The topic's text is looked at only then (`as_str`
    /// re-checks its UTF-8). A refusal is counted in `deliveries_not_authorized`.
    pub(super) fn acl_allows_delivery(
        &self,
        control: &AccessControl,
        counters: &ShardCounters,
        conn: ConnId,
        topic: &MqttStr,
        client_id: impl FnOnce() -> Option<MqttStr>,
    ) -> bool {
        if self.acl_clients.is_empty() {
            return true;
        }
        let epoch = control.rules_epoch();
        let checked = |c: &&AclClient| c.read_filtered || c.rules_epoch != epoch;
        let Some(client) = self.acl_clients.get(&conn).filter(checked) else {
            return true;
        };
        let grant = client.grant.as_deref();
        if !client.read_filtered && grant.is_some_and(|g| g.superuser || g.remote_topics) {
            // Admitted by a superuser grant or a backend's answer, which are not asked again
            // per message: the file's new rules do not apply to it.
            return true;
        }
        let rules = grant.and_then(|g| g.rules.as_ref());
        if control.acl().is_none() && rules.is_none() {
            return true;
        }
        let Some(client_id) = client_id() else {
            return true;
        };
        let topic = topic.as_str();
        let identity = identity(&client_id, client.username.as_ref());
        let by_file = control
            .acl()
            .is_some_and(|acl| acl.check(&identity, topic, Access::Read));
        let allowed = by_file
            || rules.is_some_and(|rules| rules.check(&anonymous(&client_id), topic, Access::Read));
        if !allowed {
            ShardCounters::add(&counters.deliveries_not_authorized, 1);
        }
        allowed
    }
}

/// A filter without its `$share/<group>/` prefix: the topics a shared subscription matches.
pub(super) fn unshared(filter: &str) -> &str {
    filter
        .strip_prefix("$share/")
        .and_then(|rest| rest.split_once('/'))
        .map_or(filter, |(_group, inner)| inner)
}
