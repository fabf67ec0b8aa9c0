//! One broker shard: the MQTT protocol handler that `ring-runtime` drives on one core.
//!
//! It owns the connections its listener accepted, the sessions of those clients, and a replica
//! of the subscription table and the retained index. Each submodule handles one concern; the
//! [`Handler`] impl below only dispatches.
//!
//! [`BrokerShard`] is a composition of owned parts (its fields). Work that touches one part is
//! a method of that part, given what else it reads (the shared state, the shard id, the
//! figures) as arguments; work that touches a few parts is a method of one of them taking the
//! others, or of a short-lived view that borrows just those parts (`parts::Wire`,
//! `parts::SubscriptionBook`, `Throttling`, `WillJudge`, ...). What stays on `BrokerShard`
//! is the dispatch and the work that reaches across the whole shard: a packet's handling, a
//! session's connect, move, delivery and end.

mod ack_gate;
mod acks;
mod acl;
mod acl_client;
mod admin;
mod aliases;
mod auth_exchange;
mod auto_subscribe;
mod changes;
mod claims;
mod close;
mod cluster;
mod cluster_acks;
mod connect;
mod deadlines;
mod delayed;
mod delayed_book;
mod deliver;
mod door;
mod drain;
mod durability;
mod durable;
mod exchanges;
mod fault;
mod fence;
mod figures;
mod frame_cache;
mod gate;
mod gauges;
mod grant_recheck;
mod grant_rechecks;
mod held_acks;
mod inbound;
mod journal;
mod journal_book;
mod lifecycle;
mod login;
mod logins;
mod memory;
mod mirror;
mod mobility;
mod order_kept;
mod order_waits;
mod overload;
mod ownership;
mod owning;
mod parts;
mod proxy;
mod publish;
mod publish_order;
mod quiet;
mod rate_buckets;
mod recover;
mod refused_acks;
mod release;
mod replica;
mod retained_cursor;
mod retained_delivery;
mod retaining;
mod routes;
mod send;
mod slow;
mod spill;
mod subscribe;
mod sys;
mod takeover;
mod throttle;
mod timer_book;
mod timers;
mod topic_checks;
mod topic_waits;
mod trace;
mod trace_book;
mod transport;
mod will_check;
mod will_checks;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use codec::MqttStr;
use ring_runtime::{CloseReason, ConnId, Handler, ShardId};

use crate::conn::Connections;
use crate::message::ShardMsg;
use crate::session::Sessions;
use crate::shared::Shared;

pub(crate) use aliases::{Ctx, FastMap, FastSet};
pub use fault::Fault;
pub(crate) use timer_book::ArmedTimer;
use timer_book::TimerBook;

/// One shard's broker state, in owned parts: a feature touches the part it is about.
pub struct BrokerShard {
    shared: Arc<Shared>,
    id: ShardId,
    /// The connections this shard accepted.
    conns: Connections,
    /// The sessions of this shard's clients.
    sessions: Sessions,
    /// This shard's replica of the replicated state, and what waits for it.
    replication: parts::Replication,
    /// Per-turn routing and the sessions moving between shards.
    delivery: parts::Delivery,
    /// Timers armed for connections and sessions.
    timers: TimerBook,
    /// This turn's stored writes and what waits for them.
    durable: durability::Durability,
    /// What the door knows of each connection: listener, `[ip]` admission, publish rates.
    door: parts::Door,
    /// Clients' identities and what waits for the authentication backends.
    auth: parts::AuthWaits,
    /// What waits for the cluster link.
    cluster_side: parts::ClusterSide,
    /// What the shard measures of itself: `$SYS` gauges and the turn's clock.
    figures: parts::Figures,
}

impl BrokerShard {
    /// The shard `id` of a broker with `shard_count` shards.
    pub fn new(shared: Arc<Shared>, id: ShardId, shard_count: usize) -> Self {
        let replica = replica::ReplicaState::new(
            shared.config.routing.shared_strategy,
            shared.config.runtime.max_pending_changes,
            id,
        );
        let store = shared.persistence.store.clone();
        let durable = durability::Durability::new(store, shared.config.persistence.acks_wait());
        let connect_timeout = shared.config.connection.connect_timeout;
        let keep_bytes = shared.config.runtime.subscribe_order_keep_bytes;
        let shared_started = shared.time.started;
        let shared_metrics = std::sync::Arc::clone(&shared.metrics);
        let slow = crate::slow::SlowBook::new(shared.config.slow_subscribers.clone());
        let drop_events = (shared.links)
            .events_of(broker_api::EventKind::MessageDropped)
            .and(shared.links.events.clone());
        let mut shard = Self {
            shared,
            id,
            conns: Connections::default(),
            sessions: Sessions::default(),
            replication: parts::Replication {
                replica,
                gate: ack_gate::AckGate::default(),
                order_waits: order_waits::OrderWaits::default(),
                kept: order_kept::KeptPublishes::new(keep_bytes),
                rematched: Vec::new(),
            },
            delivery: parts::Delivery {
                routes: routes::Routes::new(shard_count),
                mobility: mobility::Mobility::new(connect_timeout),
                outbound: crate::outbound::ShardView::new(id.index()),
                retained: retained_cursor::RetainedCursors::default(),
                delayed: delayed_book::DelayedBook::default(),
            },
            timers: TimerBook::default(),
            durable,
            door: parts::Door::default(),
            auth: parts::AuthWaits::default(),
            cluster_side: parts::ClusterSide::default(),
            figures: parts::Figures {
                gauges: gauges::Gauges::default(),
                metrics: std::sync::Arc::clone(&shared_metrics),
                index: id.index(),
                started: shared_started,
                turn_clock: (shared_started, 0),
                drop_events,
                slow,
                traces: trace_book::TraceBook::default(),
            },
        };
        shard.install_recovered();
        shard
    }

    /// Bytes charged against the queues' shared budget (what sessions hold queued).
    pub fn queued_bytes_charged(&self) -> u64 {
        self.shared.limits.queues.budget.used()
    }

    /// The connections as control packets reach them (see [`parts::Wire`]).
    fn wire(&mut self) -> parts::Wire<'_> {
        parts::Wire::new(
            &mut self.conns,
            &mut self.delivery.routes,
            &self.figures,
            &self.shared,
        )
    }

    /// The parts a subscription change touches (see [`parts::SubscriptionBook`]).
    fn subscriptions(&mut self) -> parts::SubscriptionBook<'_> {
        parts::SubscriptionBook {
            sessions: &mut self.sessions,
            durable: &mut self.durable,
            figures: &mut self.figures,
            auth: &mut self.auth,
            shared: &self.shared,
        }
    }
}

/// The client id of the session `conn` is attached to.
fn client_id_of(conns: &Connections, sessions: &Sessions, conn: ConnId) -> Option<MqttStr> {
    let subscriber = conns.get(&conn)?.session()?;
    sessions.client_id(subscriber).cloned()
}

impl Connections {
    /// The span every log line about connection `conn` is written in: connection id, client
    /// id (its session in `sessions`) and shard. Built only when debug logging is on.
    fn span(&self, sessions: &Sessions, shard: ShardId, conn: ConnId) -> tracing::Span {
        tracing::debug_span!(
            "conn",
            id = conn.index(),
            client = client_id_of(self, sessions, conn)
                .as_ref()
                .map_or("", |c| c.as_str()),
            shard = shard.index(),
        )
    }
}

impl Handler for BrokerShard {
    type Message = ShardMsg;

    fn on_accept(&mut self, ctx: &mut Ctx, conn: ConnId, peer: SocketAddr) {
        let _span = self.conns.span(&self.sessions, self.id, conn).entered();
        self.accept(ctx, conn, peer);
    }

    fn on_data(&mut self, ctx: &mut Ctx, conn: ConnId, data: Bytes) {
        let _span = self.conns.span(&self.sessions, self.id, conn).entered();
        self.receive(ctx, conn, data);
    }

    fn on_layer_error(&mut self, ctx: &mut Ctx, conn: ConnId, error: ring_runtime::LayerError) {
        let _span = self.conns.span(&self.sessions, self.id, conn).entered();
        self.transport_failed(ctx, conn, error);
    }

    fn on_read_closed(&mut self, ctx: &mut Ctx, conn: ConnId) {
        ctx.close(conn);
    }

    fn on_closed(&mut self, ctx: &mut Ctx, conn: ConnId, reason: CloseReason) {
        let _span = self.conns.span(&self.sessions, self.id, conn).entered();
        self.connection_closed(ctx, conn, reason);
    }

    fn on_timer(&mut self, ctx: &mut Ctx, _timer: ring_runtime::TimerId, key: u64) {
        self.timer_fired(ctx, key);
    }

    fn on_messages(&mut self, ctx: &mut Ctx, messages: Vec<ShardMsg>) {
        for message in messages {
            match message {
                ShardMsg::Change(change) => {
                    let effects = changes::ApplyEffects {
                        mobility: &mut self.delivery.mobility,
                        figures: &self.figures,
                        links: &self.shared.links,
                        shard: self.id,
                    };
                    self.replication.receive_change(change, effects);
                }
                ShardMsg::Deliver {
                    origin,
                    forwarded,
                    copies,
                    confirm,
                } => {
                    if let Some(ticket) = confirm {
                        self.durable.confirm(origin, ticket);
                    }
                    self.deliver_batch(ctx, origin, forwarded, copies);
                }
                ShardMsg::Fence {
                    subscriber,
                    origin,
                    forwarded,
                } => {
                    self.fence_arrived(ctx, subscriber, origin, forwarded);
                }
                ShardMsg::Takeover(request) => self.hand_over(ctx, request),
                ShardMsg::Transfer(transfer) => self.take_over(ctx, transfer),
                ShardMsg::Start => {
                    self.start_sys(ctx);
                    self.resume_recovered(ctx);
                    self.timers.collect_freed_memory(ctx);
                }
                ShardMsg::Applied => {}
                ShardMsg::ReturnMemory => self.timers.collect_freed_memory(ctx),
                ShardMsg::Admin(query) => self.answer_admin(ctx, query),
                ShardMsg::Cluster(publish) => self.publish_from_cluster(ctx, *publish),
                ShardMsg::ClusterOwnership(answer) => self.ownership_answered(ctx, *answer),
                ShardMsg::ClusterRelease(request) => self.release_to_cluster(ctx, *request),
                ShardMsg::ClusterReleaseTaken(client_id) => self.released_copy_taken(&client_id),
            }
        }
        self.replication
            .publish_applied_watermark(&self.shared.order, self.id);
        self.delivery
            .send_fences(ctx, &mut self.durable, &self.figures, self.id);
        self.replication
            .nudge_acknowledging_shards(ctx, &self.figures);
        self.release_acks(ctx);
        self.settle_kept_publishes(ctx);
        self.release_ordered_publishes(ctx);
        self.release_cluster_acks(ctx);
        self.release_journal_holds(ctx);
        self.release_durable(ctx);
        self.take_queue_reads(ctx);
    }

    fn on_input_fences_passed(&mut self, ctx: &mut Ctx) {
        self.settle_kept_publishes(ctx);
        self.release_ordered_publishes(ctx);
    }

    fn on_turn_end(&mut self, ctx: &mut Ctx) {
        self.refresh_traces(ctx);
        // What became durable goes out first: a connection it unparks reads on here, and what
        // that produces (routed copies, writes, held acknowledgements) is flushed and handed
        // to the store below, in this turn (nothing else may wake the shard for it).
        self.take_queue_reads(ctx);
        self.take_auth_verdicts(ctx);
        self.recheck_grants(ctx);
        self.release_cluster_acks(ctx);
        self.release_journal_holds(ctx);
        self.release_durable(ctx);
        self.release_acks(ctx);
        self.drain_backlog(ctx);
        self.delivery
            .flush_routes(ctx, &mut self.durable, &self.figures, self.id);
        let queued = ctx.shard_queued_bytes() as u64;
        self.delivery
            .outbound
            .publish(&self.shared.limits.outbound, queued);
        self.figures
            .update_gauges(&self.sessions, &self.replication.replica.retained);
        self.figures.copy_turn_stats(ctx);
        self.delivery.routes.frame_cache.clear();
        self.timers
            .return_freed_memory(&self.shared, &self.figures, ctx);
        self.hand_journal(ctx);
        self.durable.submit(self.id);
    }

    fn on_shutdown(&mut self, ctx: &mut Ctx) {
        self.shutdown(ctx);
    }
}
