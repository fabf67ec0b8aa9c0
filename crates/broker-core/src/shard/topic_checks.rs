//! Topic checks only a backend can answer (HTTP's ACL URL), asked without blocking.
//!
//! Before a PUBLISH or SUBSCRIBE of a client whose backend checks topics is handled, the
//! checks it needs are looked up in the gatekeeper's cache. Any missing: the packet is set
//! aside, its connection parked (what the client sends behind it waits in the carry), and a
//! worker asks the backend. The answers come back in the shard's inbox; the packet is then
//! handled with them, and the connection reads on.

use codec::{MqttStr, Packet};
use ring_runtime::ConnId;
use tracing::debug;

use super::acl_client::{AclClient, TopicVerdict};
use super::parts::AuthWaits;
use super::topic_waits::WaitingPacket;
use super::{BrokerShard, Ctx};
use crate::shared_parts::AccessControl;
use access::backend::{AclRequest, TopicAccess};
use access::gatekeeper::keys::AclKey;
use access::gatekeeper::workers::Job;
use ring_runtime::ShardId;

impl BrokerShard {
    /// A worker's answers for the packet `conn` set aside: handle it, then read on.
    pub(super) fn topics_answered(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        token: u64,
        answers: Vec<bool>,
    ) {
        let _span = self.conns.span(&self.sessions, self.id, conn).entered();
        let Some(waiting) = self.auth.topic_waits.waiting.remove(&conn) else {
            return self.will_answered(ctx, conn, token, &answers);
        };
        if waiting.token != token {
            self.auth.topic_waits.waiting.insert(conn, waiting);
            return;
        }
        self.auth.topic_waits.fresh = waiting
            .requests
            .into_iter()
            .zip(answers)
            .map(|(request, allowed)| (request.topic, request.access, allowed))
            .collect();
        let handled = self.handle_packet(ctx, conn, waiting.packet);
        self.auth.topic_waits.fresh.clear();
        match handled {
            Ok(()) => self.unpark_if_free(ctx, conn),
            Err(fault) => self.wire().fail(ctx, conn, fault),
        }
    }
}

impl AuthWaits {
    /// Sets `packet` aside when a backend (in `control`) must be asked about it first: `None`,
    /// and the caller parks the connection; the packet comes back when it can be handled now.
    /// `client_id` tells `conn`'s client id, asked only when a check is needed.
    pub(super) fn hold_for_topic_checks(
        &mut self,
        control: &AccessControl,
        shard: ShardId,
        ctx: &mut Ctx,
        conn: ConnId,
        packet: Packet,
        client_id: impl FnOnce() -> Option<MqttStr>,
    ) -> Option<Packet> {
        if self.acl_clients.is_empty() {
            return Some(packet);
        }
        let requests = self.unanswered_checks(control, ctx, conn, &packet, client_id);
        if requests.is_empty() {
            return Some(packet);
        }
        let link = self
            .acl_clients
            .get(&conn)
            .and_then(|c| c.grant.as_ref())
            .and_then(|g| g.link);
        let (Some(gatekeeper), Some(link)) = (&control.gatekeeper, link) else {
            return Some(packet);
        };
        self.topic_waits.next_token += 1;
        let token = self.topic_waits.next_token;
        let job = Job::Topics {
            shard,
            conn,
            token,
            link,
            requests: requests.clone(),
        };
        if gatekeeper.submit(job).is_err() {
            // Too many questions wait already: handled now, the unanswered checks refuse.
            debug!("topic check not asked: auth.max_pending questions wait already");
            return Some(packet);
        }
        let waiting = WaitingPacket {
            token,
            packet,
            requests,
        };
        self.topic_waits.waiting.insert(conn, waiting);
        None
    }

    /// The checks for `packet` that only the backend can answer and that are not cached.
    fn unanswered_checks(
        &self,
        control: &AccessControl,
        ctx: &Ctx,
        conn: ConnId,
        packet: &Packet,
        client_id: impl FnOnce() -> Option<MqttStr>,
    ) -> Vec<AclRequest> {
        let Some(client) = self.acl_clients.get(&conn) else {
            return Vec::new();
        };
        if !client.grant.as_ref().is_some_and(|g| g.remote_topics) {
            return Vec::new();
        }
        let Some(client_id) = client_id() else {
            return Vec::new();
        };
        let request = |topic: &str, access| AclRequest {
            client_id: client_id.as_str().to_owned(),
            username: client.username.as_ref().map(|u| u.as_str().to_owned()),
            peer: ctx
                .peer_addr(conn)
                .unwrap_or(access::gatekeeper::workers::NO_PEER),
            topic: topic.to_owned(),
            access,
        };
        match packet {
            Packet::Publish(publish) if !publish.topic().is_empty() => {
                let topic = publish.topic();
                match self.publish_verdict(control, conn, &client_id, topic) {
                    TopicVerdict::Ask => vec![request(topic, TopicAccess::Publish)],
                    _ => Vec::new(),
                }
            }
            Packet::Subscribe(subscribe) => subscribe
                .filters
                .iter()
                .filter(|(filter, _)| {
                    self.subscribe_verdict(control, conn, &client_id, filter.as_str())
                        .0
                        == TopicVerdict::Ask
                })
                .map(|(filter, _)| request(filter.as_str(), TopicAccess::Subscribe))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The cached (or just received) answer of `client`'s backend for `topic`.
    pub(super) fn remote_answer(
        &self,
        control: &AccessControl,
        client_id: &MqttStr,
        client: &AclClient,
        topic: &str,
        access: TopicAccess,
    ) -> Option<bool> {
        let mut fresh = self.topic_waits.fresh.iter();
        if let Some((_, _, allowed)) = fresh.rfind(|(t, a, _)| t == topic && *a == access) {
            return Some(*allowed);
        }
        let gatekeeper = control.gatekeeper.as_ref()?;
        let username = client.username.as_ref().map(MqttStr::as_str);
        gatekeeper.cached_topic(&AclKey::new(client_id.as_str(), username, topic, access))
    }

    /// The connection ended: a packet it set aside is dropped (the answers are ignored).
    pub(super) fn topic_wait_closed(&mut self, conn: ConnId) {
        self.topic_waits.waiting.remove(&conn);
        self.topic_waits.wills.will_check_closed(conn);
    }
}
