//! [`AclClient`]: a connected client's identity and grant while an ACL is configured, and the [`TopicVerdict`] a topic check comes to; `acl.rs` asks the rules.

use access::gatekeeper::grant::ClientGrant;
use access::{Access, AclFile, ClientIdentity, SubscribeScope};
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

impl AclClient {
    /// How much of `filter` the ACL file and the client's own rules let it read together;
    /// `None` when neither applies to it.
    pub(super) fn local_scope(
        &self,
        file: Option<&AclFile>,
        client_id: &MqttStr,
        filter: &str,
    ) -> Option<SubscribeScope> {
        let identity = identity(client_id, self.username.as_ref());
        let file = file.map(|acl| acl.subscribe_scope(&identity, filter));
        let rules = self
            .grant
            .as_deref()
            .and_then(|g| g.rules.as_ref())
            .map(|rules| rules.subscribe_scope(&anonymous(client_id), filter));
        [file, rules]
            .into_iter()
            .flatten()
            .max_by_key(|scope| match scope {
                SubscribeScope::None => 0,
                SubscribeScope::Some => 1,
                SubscribeScope::All => 2,
            })
    }
}

/// Whether a client with `username` and `grant` (kept only when it restricts: see
/// [`ClientGrant::restricts`]) may write to `topic`; `remote`: its backend's answer, when
/// known. PUBLISH and wills (`will_check.rs`) are judged by this one rule.
pub(super) fn write_verdict(
    file: Option<&AclFile>,
    client_id: &MqttStr,
    username: Option<&MqttStr>,
    grant: Option<&ClientGrant>,
    topic: &str,
    remote: impl FnOnce() -> Option<bool>,
) -> TopicVerdict {
    if grant.is_some_and(|g| g.superuser) {
        return TopicVerdict::Allowed;
    }
    let identity = identity(client_id, username);
    let local = [
        file.map(|acl| acl.check(&identity, topic, Access::Write)),
        grant
            .and_then(|g| g.rules.as_ref())
            .map(|rules| rules.check(&anonymous(client_id), topic, Access::Write)),
    ];
    if local.contains(&Some(true)) {
        return TopicVerdict::Allowed;
    }
    if grant.is_some_and(|g| g.remote_topics) {
        return match remote() {
            Some(true) => TopicVerdict::Allowed,
            Some(false) => TopicVerdict::Refused,
            None => TopicVerdict::Ask,
        };
    }
    if local.iter().any(Option::is_some) {
        TopicVerdict::Refused
    } else {
        TopicVerdict::Allowed
    }
}

pub(super) fn identity<'a>(
    client_id: &'a MqttStr,
    username: Option<&'a MqttStr>,
) -> ClientIdentity<'a> {
    ClientIdentity {
        client_id: client_id.as_str(),
        username: username.map(MqttStr::as_str),
    }
}

/// The identity a client's own rules are checked with (they sit in the anonymous section).
pub(super) fn anonymous(client_id: &MqttStr) -> ClientIdentity<'_> {
    ClientIdentity {
        client_id: client_id.as_str(),
        username: None,
    }
}
