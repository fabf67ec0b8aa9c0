//! The shard's parts that group smaller state: each is owned by [`super::BrokerShard`] and
//! touched by the files of its feature (named on each field). Also the short-lived views that
//! borrow just the parts some work touches and that the shard builds ([`Wire`],
//! [`SubscriptionBook`]); a view built by one feature only lives in its file
//! (`throttle.rs`, `will_check.rs`, `lifecycle.rs`, ...).

use ring_runtime::ConnId;

use crate::outbound::{OutboundBudget, ShardView};

use super::FastMap;
use super::ack_gate::AckGate;
use super::acl_client::AclClient;
use super::delayed_book::DelayedBook;
use super::gauges::Gauges;
use super::grant_rechecks::GrantRechecks;
use super::held_acks::ClusterAcks;
use super::logins::Logins;
use super::mobility::Mobility;
use super::order_kept::{KeptPublishes, Rematch};
use super::order_waits::OrderWaits;
use super::owning::Owning;
use super::rate_buckets::Throttle;
use super::replica::ReplicaState;
use super::retained_cursor::RetainedCursors;
use super::routes::Routes;
use super::topic_waits::TopicWaits;

/// This shard's replica of the replicated state (subscriptions, retained, owners), and the
/// acknowledgements waiting for it to apply changes (`gate.rs`).
pub(super) struct Replication {
    pub(super) replica: ReplicaState,
    pub(super) gate: AckGate,
    /// PUBLISHes waiting for subscription changes to arrive (`publish_order.rs`).
    pub(super) order_waits: OrderWaits,
    /// Messages routed before subscriptions that may precede them arrived (`order_kept.rs`),
    /// and the copies such subscriptions owe, to route after the mailbox batch.
    pub(super) kept: KeptPublishes,
    pub(super) rematched: Vec<Rematch>,
}

/// Per-turn routing buffers and caches (`routes.rs`), and sessions moving between shards:
/// forwarding, fences, claims (`mobility.rs`).
pub(super) struct Delivery {
    pub(super) routes: Routes,
    pub(super) mobility: Mobility,
    /// This shard's view of what all send queues hold.
    pub(super) outbound: ShardView,
    /// Retained messages still owed to new subscriptions (`retained_delivery.rs`).
    pub(super) retained: RetainedCursors,
    /// The delayed messages (`$delayed/`) this shard received and keeps until they fire
    /// (`delayed.rs`).
    pub(super) delayed: DelayedBook,
}

impl Delivery {
    /// Whether `conn`'s send queue takes another frame (see [`OutboundBudget::admits`]).
    pub(super) fn send_queue_admits(
        &mut self,
        budget: &OutboundBudget,
        ctx: &super::Ctx,
        conn: ConnId,
    ) -> bool {
        let conn_queued = ctx.queued_bytes(conn) as u64;
        self.outbound
            .admits(budget, conn_queued, ctx.shard_queued_bytes() as u64)
    }
}

/// What the door knows of each connection.
#[derive(Default)]
pub(super) struct Door {
    /// The listener kind of connections that did not come in over plain TCP.
    pub(super) listeners: FastMap<ConnId, crate::metrics::Listener>,
    /// The addresses of IPv6 clients the `[ip]` guard admitted (an IPv4 one is in its
    /// connection's record: `guard::DoorMark`).
    pub(super) v6_clients: FastMap<ConnId, std::net::Ipv6Addr>,
    /// Publish rate buckets of connections (`throttle.rs`).
    pub(super) throttle: Throttle,
    /// Connections waiting for their PROXY protocol header (`proxy.rs`): the header so far
    /// and the address of the listener that accepted them.
    pub(super) proxy_waits: FastMap<ConnId, (transport::ProxyReader, std::net::SocketAddr)>,
}

/// Clients' identities while an ACL is configured (`acl.rs`), logins waiting for the
/// authentication backends and grants not yet attached (`login.rs`), and packets waiting for
/// a backend's topic answers (`topic_checks.rs`).
#[derive(Default)]
pub(super) struct AuthWaits {
    pub(super) acl_clients: FastMap<ConnId, AclClient>,
    pub(super) logins: Logins,
    pub(super) topic_waits: TopicWaits,
    /// Backend grants asked about again after a reload (`grant_recheck.rs`).
    pub(super) rechecks: GrantRechecks,
    /// MQTT 5 AUTH exchanges in progress, and the methods clients authenticated with
    /// (`auth_exchange.rs`).
    pub(super) exchanges: super::exchanges::Exchanges,
}

/// CONNECTs waiting for the cluster's word on their client id (`ownership.rs`), and
/// acknowledgements waiting for the cluster link (`cluster_acks.rs`).
#[derive(Default)]
pub(super) struct ClusterSide {
    pub(super) owning: Owning,
    pub(super) cluster_acks: ClusterAcks,
    /// QoS 2 delivery steps waiting for the delivery journal (`journal.rs`).
    pub(super) journal: super::journal_book::Journal,
    /// Keys of the messages this shard's clients publish (`journal.rs`).
    pub(super) message_keys: super::journal_book::MessageKeys,
}

/// What the shard measures of itself.
pub(super) struct Figures {
    /// Gauges for `$SYS` (`sys.rs`).
    pub(super) gauges: Gauges,
    /// The broker's figures, of which this shard writes its own block (`figures.rs`).
    pub(super) metrics: std::sync::Arc<crate::metrics::Metrics>,
    /// This shard's index among the blocks.
    pub(super) index: usize,
    /// When the broker started, on its clock.
    pub(super) started: std::time::Instant,
    /// The last turn's `ctx.now()` and the same in nanoseconds since the broker started
    /// (`figures.rs`, `turn_nanos`).
    pub(super) turn_clock: (std::time::Instant, u64),
    /// Where `message.dropped` events go, if anywhere wants them.
    pub(super) drop_events: Option<std::sync::Arc<dyn broker_api::EventHook>>,
    /// This shard's slow subscribers (`slow.rs`).
    pub(super) slow: crate::slow::SlowBook,
    /// The connections running traces follow (`trace.rs`).
    pub(super) traces: super::trace_book::TraceBook,
}

/// What putting control packets on connections and closing them touches: the connections,
/// the encode buffer (`routes.rs`), the shard's figures (bytes sent, refusals) and the shared
/// limits (the partial-frame budget a closed connection gives back). Built by
/// [`super::BrokerShard::wire`], or by [`Wire::new`] beside another part; its methods live
/// beside their feature (`send.rs`, `inbound.rs`, `connect.rs`, `deadlines.rs`, `admin.rs`,
/// `deliver.rs`).
pub(super) struct Wire<'a> {
    pub(super) conns: &'a mut crate::conn::Connections,
    pub(super) scratch: &'a mut bytes::BytesMut,
    pub(super) figures: &'a Figures,
    pub(super) shared: &'a crate::shared::Shared,
}

impl<'a> Wire<'a> {
    /// The wire over `conns`, encoding in the scratch buffer of `routes`.
    pub(super) fn new(
        conns: &'a mut crate::conn::Connections,
        routes: &'a mut Routes,
        figures: &'a Figures,
        shared: &'a crate::shared::Shared,
    ) -> Self {
        Self {
            conns,
            scratch: &mut routes.scratch,
            figures,
            shared,
        }
    }
}

/// What a subscription change touches: the client's session, the store, the subscription
/// gauge and the replicated order (the figures stamp and post the change), the ACL state (a
/// SUBSCRIBE is judged) and the shared limits and hooks. Built by
/// [`super::BrokerShard::subscriptions`]; its methods are in `subscribe.rs`.
pub(super) struct SubscriptionBook<'a> {
    pub(super) sessions: &'a mut crate::session::Sessions,
    pub(super) durable: &'a mut super::durability::Durability,
    pub(super) figures: &'a mut Figures,
    pub(super) auth: &'a mut AuthWaits,
    pub(super) shared: &'a crate::shared::Shared,
}
