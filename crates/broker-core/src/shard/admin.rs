//! The admin API's questions ([`crate::admin_query`]; the `admin` crate asks them),
//! answered by the shard that owns what they are about: its sessions and connections, its
//! replica's retained messages, and publishing as the broker.

use codec::{MqttStr, ProtocolVersion, PublishProperties};
use ring_runtime::{ConnId, ShardId};
use router::TopicName;
use session_store::SessionExpiry;
use tracing::info;

use super::parts::Replication;
use super::parts::Wire;
use super::publish::PublishInput;
use super::{BrokerShard, Ctx};
use crate::admin_query::{AdminQuery, ClientDetail, ClientInfo, RetainedInfo, SubscriptionInfo};
use crate::conn::Connections;
use crate::directory::SessionOwner;
use crate::session::{Session, Sessions};
use crate::shared_parts::{BrokerTime, SessionDirectory};

impl BrokerShard {
    /// Answers one admin question (a reply nobody waits for any more is dropped).
    pub(super) fn answer_admin(&mut self, ctx: &mut Ctx, query: AdminQuery) {
        match query {
            AdminQuery::Clients {
                after,
                limit,
                search,
                reply,
            } => {
                let pages = ClientPages::of(self);
                let _ =
                    reply.send(pages.client_page(ctx, after.as_deref(), search.as_deref(), limit));
            }
            AdminQuery::Client { client_id, reply } => {
                let _ = reply.send(ClientPages::of(self).client_detail(ctx, &client_id));
            }
            AdminQuery::Disconnect {
                client_id,
                reason,
                reply,
            } => {
                let mut wire = Wire::new(
                    &mut self.conns,
                    &mut self.delivery.routes,
                    &self.figures,
                    &self.shared,
                );
                let _ = reply.send(wire.admin_disconnect(&self.sessions, ctx, &client_id, reason));
            }
            AdminQuery::Subscriptions {
                after,
                limit,
                reply,
            } => {
                let _ = reply.send(ClientPages::of(self).subscription_page(after.as_ref(), limit));
            }
            AdminQuery::Retained {
                after,
                limit,
                reply,
            } => {
                let _ = reply.send(self.replication.retained_page(after.as_deref(), limit));
            }
            AdminQuery::Delayed {
                after,
                limit,
                reply,
            } => {
                let _ = reply.send(self.delivery.delayed.page(after, limit, ctx.now()));
            }
            AdminQuery::SlowSubscribers { reply } => {
                let _ = reply.send(self.figures.slow_report(&self.sessions, ctx.now()));
            }
            AdminQuery::CancelDelayed { id, reply } => {
                let _ = reply.send(self.cancel_delayed(ctx, id));
            }
            AdminQuery::Publish {
                topic,
                payload,
                qos,
                retain,
                reply,
            } => {
                let _ = reply.send(self.admin_publish(ctx, &topic, payload, qos, retain));
            }
        }
    }

    fn admin_publish(
        &mut self,
        ctx: &mut Ctx,
        topic: &str,
        payload: bytes::Bytes,
        qos: codec::QoS,
        retain: bool,
    ) -> Result<(), String> {
        if topic.starts_with('$') {
            return Err(format!(
                "topic `{topic}`: topics starting with $ are the broker's own"
            ));
        }
        let topic_text = MqttStr::try_from(topic).map_err(|e| format!("topic `{topic}`: {e}"))?;
        let name = TopicName::new(topic, &self.shared.limits.topics)
            .map_err(|e| format!("topic `{topic}`: {e}"))?;
        info!(topic, qos = qos as u8, retain, "published by the admin API");
        let broker = MqttStr::default();
        self.publish_internal(
            ctx,
            PublishInput {
                topic: name,
                topic_text,
                payload,
                qos,
                retain,
                properties: PublishProperties::default(),
                expiry: None,
                publisher: None,
                client_id: &broker,
                to_cluster: true,
            },
        );
        Ok(())
    }
}

/// What the admin API's questions about clients read: the sessions and their connections,
/// the session directory (whose identity each session belongs to), the broker's clock
/// (connected since) and this shard's id.
struct ClientPages<'a> {
    sessions: &'a Sessions,
    conns: &'a Connections,
    directory: &'a SessionDirectory,
    time: &'a BrokerTime,
    shard: ShardId,
}

impl<'a> ClientPages<'a> {
    fn of(shard: &'a BrokerShard) -> Self {
        Self {
            sessions: &shard.sessions,
            conns: &shard.conns,
            directory: &shard.shared.directory,
            time: &shard.shared.time,
            shard: shard.id,
        }
    }

    /// Sessions after `after` by client id, those whose id, address or username contains
    /// `search` when given, `limit` at most.
    fn client_page(
        &self,
        ctx: &Ctx,
        after: Option<&str>,
        search: Option<&str>,
        limit: usize,
    ) -> Vec<ClientInfo> {
        let found = |session: &Session| {
            search.is_none_or(|text| {
                session.client_id.as_str().contains(text)
                    || (session.conn)
                        .and_then(|conn| ctx.peer_addr(conn).ok())
                        .is_some_and(|addr| addr.to_string().contains(text))
                    || self
                        .username_of(session)
                        .is_some_and(|name| name.contains(text))
            })
        };
        let mut page: Vec<&Session> = self
            .sessions
            .iter()
            .filter(|s| after.is_none_or(|after| s.client_id.as_str() > after))
            .filter(|s| found(s))
            .collect();
        page.sort_unstable_by(|a, b| a.client_id.as_str().cmp(b.client_id.as_str()));
        page.truncate(limit);
        page.into_iter()
            .map(|session| self.client_info(ctx, session))
            .collect()
    }

    /// What the admin API shows of one client.
    fn client_info(&self, ctx: &Ctx, session: &Session) -> ClientInfo {
        let connection = session
            .conn
            .and_then(|conn| Some((conn, self.conns.get(&conn)?)));
        let started = std::time::SystemTime::now() - self.time.uptime();
        let queued_on_disk = session.spilled().map_or(0, |spilled| spilled.on_disk);
        ClientInfo {
            client_id: session.client_id.as_str().to_owned(),
            username: self.username_of(session).map(|name| name.to_string()),
            connected: connection.is_some(),
            address: connection
                .and_then(|(conn, _)| ctx.peer_addr(conn).ok())
                .map(|addr| addr.to_string()),
            protocol: protocol_name(session.protocol),
            keep_alive: connection.map(|(_, c)| c.keep_alive),
            subscriptions: session.subscriptions.len(),
            inflight: session.inflight.len(),
            queued: session.queue.len() as u64 + queued_on_disk,
            queued_on_disk,
            connected_since: connection.map(|(_, c)| {
                let at = started + std::time::Duration::from_secs(u64::from(c.connected_at_s));
                at.duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
            }),
            shard: self.shard.index(),
        }
    }

    /// The username `session` belongs to, as the session directory records its owner (a
    /// lookup there: the connection keeps no copy of it).
    fn username_of(&self, session: &Session) -> Option<std::sync::Arc<str>> {
        match self.directory.owner_of(session.client_id.as_str()) {
            SessionOwner::User(name) => Some(name),
            SessionOwner::Anonymous | SessionOwner::Unbound => None,
        }
    }

    /// One client, with its subscriptions.
    fn client_detail(&self, ctx: &Ctx, client_id: &str) -> Option<ClientDetail> {
        let key = MqttStr::try_from(client_id).ok()?;
        let session = self.sessions.get(&key)?;
        Some(ClientDetail {
            info: self.client_info(ctx, session),
            session_expiry: match session.expiry {
                SessionExpiry::OnClose => Some(0),
                SessionExpiry::After(seconds) => Some(u64::from(seconds)),
                SessionExpiry::Never => None,
            },
            subscription_list: subscriptions_of(session).collect(),
        })
    }

    /// One page of the subscriptions, by client id and filter, after `after`.
    fn subscription_page(
        &self,
        after: Option<&(String, String)>,
        limit: usize,
    ) -> Vec<SubscriptionInfo> {
        let mut page: Vec<SubscriptionInfo> = self
            .sessions
            .iter()
            .flat_map(subscriptions_of)
            .filter(|s| {
                after.is_none_or(|(client, filter)| {
                    (s.client_id.as_str(), s.filter.as_str()) > (client.as_str(), filter.as_str())
                })
            })
            .collect();
        page.sort_unstable_by(|a, b| (&a.client_id, &a.filter).cmp(&(&b.client_id, &b.filter)));
        page.truncate(limit);
        page
    }
}

impl Replication {
    /// One page of the retained messages, by topic, after `after`.
    pub(super) fn retained_page(&self, after: Option<&str>, limit: usize) -> Vec<RetainedInfo> {
        let mut page = Vec::new();
        self.replica.retained.for_each(|topic, message| {
            if after.is_none_or(|after| topic.as_str() > after) {
                page.push(RetainedInfo {
                    topic: topic.as_str().to_owned(),
                    qos: message.qos as u8,
                    payload_bytes: message.publish.payload().len(),
                });
            }
        });
        page.sort_unstable_by(|a, b| a.topic.cmp(&b.topic));
        page.truncate(limit);
        page
    }
}

/// A session's subscriptions, as the admin API lists them.
fn subscriptions_of(session: &Session) -> impl Iterator<Item = SubscriptionInfo> + '_ {
    session
        .subscriptions
        .iter()
        .map(|(filter, subscription)| SubscriptionInfo {
            client_id: session.client_id.as_str().to_owned(),
            filter: filter.as_str().to_owned(),
            qos: subscription.options.qos as u8,
            no_local: subscription.options.no_local,
            retain_as_published: subscription.options.retain_as_published,
            retain_handling: subscription.options.retain_handling as u8,
            subscription_id: subscription.id.map(|id| id.get()),
        })
}

fn protocol_name(protocol: ProtocolVersion) -> &'static str {
    match protocol {
        ProtocolVersion::V3_1 => "3.1",
        ProtocolVersion::V3_1_1 => "3.1.1",
        ProtocolVersion::V5 => "5.0",
    }
}

impl Wire<'_> {
    /// DISCONNECT with `reason` (5.0), then close.
    fn disconnect_with(&mut self, ctx: &mut Ctx, conn: ConnId, reason: codec::ReasonCode) {
        self.send_disconnect(ctx, conn, reason);
        self.close_connection(ctx, conn);
    }

    /// Disconnects `client_id`'s client (DISCONNECT `reason` in 5.0) when its session in
    /// `sessions` has a connection; whether it had.
    fn admin_disconnect(
        &mut self,
        sessions: &Sessions,
        ctx: &mut Ctx,
        client_id: &str,
        reason: codec::ReasonCode,
    ) -> bool {
        let Ok(key) = MqttStr::try_from(client_id) else {
            return false;
        };
        let Some(conn) = sessions.get(&key).and_then(|s| s.conn) else {
            return false;
        };
        info!(
            client = client_id,
            reason = reason.name(),
            "disconnected by the admin API"
        );
        self.disconnect_with(ctx, conn, reason);
        true
    }
}
