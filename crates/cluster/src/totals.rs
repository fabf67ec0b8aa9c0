//! Cluster totals (`$SYS/broker/cluster/total/...`, `ringmq_cluster_total_*`): each node's
//! heartbeat record carries its own figures; every node sums the records of the nodes alive
//! (those whose heartbeat has not expired) each heartbeat.

use std::sync::Arc;
use std::time::SystemTime;

use async_nats::jetstream::kv;
use broker_api::ClusterNode;
use futures_util::StreamExt;
use tracing::debug;

use super::ClusterCounters;

/// One node's figures, as its heartbeat carries them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeFigures {
    /// Clients connected now.
    pub clients: u64,
    /// Sessions held now, connected or not.
    pub sessions: u64,
    /// Subscriptions held now.
    pub subscriptions: u64,
    /// PUBLISH packets received from clients since the node started.
    pub received: u64,
    /// PUBLISH packets sent to clients since the node started.
    pub sent: u64,
}

/// Where the cluster thread reads this node's figures.
pub type FiguresSource = Arc<dyn Fn() -> NodeFigures + Send + Sync>;

/// What the cluster thread needs of the node beyond `[cluster]`.
#[derive(Clone)]
pub struct NodeContext {
    /// This node's figures, for the cluster's totals.
    pub figures: FiguresSource,
    /// `queues.max_queued_messages`: the most copies mirrored per offline session.
    pub max_queued: u64,
    /// `connection.connect_timeout`: a session recovered from a dead node reads what it
    /// missed before the CONNECT's time runs out.
    pub connect_timeout: std::time::Duration,
    /// The sessions recovered from this node's store at start, without their messages:
    /// checked against their owner records once the buckets are open
    /// (`lifecycle::reconcile`), then given what they missed while the node was down
    /// (`restart.rs`).
    pub recovered: Vec<session_store::storage::StoredSession>,
    /// The keys of the copies each of them has in the store (queued, on disk included, and in
    /// flight): the catch-up leaves those messages out (`restart.rs`).
    pub stored_keys: session_store::storage::StoredKeys,
    /// The retained messages recovered from this node's store that it accepted from clients:
    /// written back to the bucket where it lacks them or holds older records
    /// (`retained_write_back.rs`).
    pub accepted_retained: Vec<broker_api::cluster::AcceptedRetained>,
}

impl std::fmt::Debug for NodeContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeContext")
            .field("max_queued", &self.max_queued)
            .field("connect_timeout", &self.connect_timeout)
            .field("recovered", &self.recovered.len())
            .field("accepted_retained", &self.accepted_retained.len())
            .finish_non_exhaustive()
    }
}

impl NodeFigures {
    /// The heartbeat value: `clients sessions subscriptions received sent`, decimal.
    pub fn encode(&self) -> String {
        format!(
            "{} {} {} {} {}",
            self.clients, self.sessions, self.subscriptions, self.received, self.sent
        )
    }

    /// A heartbeat value; `None` if it is not five numbers.
    pub fn decode(text: &str) -> Option<Self> {
        let mut numbers = text.split(' ').map(|n| n.parse::<u64>().ok());
        let mut next = || numbers.next().flatten();
        let figures = Self {
            clients: next()?,
            sessions: next()?,
            subscriptions: next()?,
            received: next()?,
            sent: next()?,
        };
        numbers.next().is_none().then_some(figures)
    }

    /// This node's row of the node list, from its heartbeat record's key (`node_id.run`, as
    /// `owners::heartbeat_key` makes it) and write time.
    fn row(&self, key: &str, this_node: bool, heartbeat_at: SystemTime) -> ClusterNode {
        let (node_id, run) = key.rsplit_once('.').unwrap_or((key, ""));
        ClusterNode {
            node_id: node_id.to_owned(),
            run: run.to_owned(),
            this_node,
            clients: self.clients,
            sessions: self.sessions,
            subscriptions: self.subscriptions,
            received: self.received,
            sent: self.sent,
            heartbeat_at,
        }
    }

    fn add(&mut self, other: &Self) {
        self.clients += other.clients;
        self.sessions += other.sessions;
        self.subscriptions += other.subscriptions;
        self.received += other.received;
        self.sent += other.sent;
    }
}

/// A heartbeat value: the node's figures, then ` g<Unix milliseconds>` while the node has
/// messages from that moment on not replayed yet (`Replays::unreplayed_from`: its NATS
/// connection was lost, or another node's, and the replay is not done). A node that takes the
/// dead run's sessions over reads what they missed from there rather than from its last
/// heartbeat (`missed::read_start`). A node of an earlier version reads such a value as
/// malformed and leaves that heartbeat out of its totals (written only while a replay is due).
pub(super) fn heartbeat_value(
    figures: &NodeFigures,
    unreplayed_from: Option<SystemTime>,
) -> String {
    with_gap(figures.encode(), unreplayed_from)
}

/// A heartbeat value's figures, and where its run's messages not replayed yet start.
fn parse_heartbeat(text: &str) -> Option<(NodeFigures, Option<SystemTime>)> {
    let (figures, gap) = split_gap(text)?;
    Some((NodeFigures::decode(figures)?, gap))
}

/// `text`, then ` g<Unix milliseconds>` of `unreplayed_from` if there is one: how a heartbeat
/// and an "alive at" stamp (`alive.rs`) carry where their run's messages not replayed yet start.
pub(super) fn with_gap(text: String, unreplayed_from: Option<SystemTime>) -> String {
    let millis = unreplayed_from.and_then(|at| at.duration_since(SystemTime::UNIX_EPOCH).ok());
    match millis {
        Some(millis) => format!("{text} g{}", millis.as_millis()),
        None => text,
    }
}

/// The text before a ` g<Unix milliseconds>` suffix ([`with_gap`]), and the moment it names
/// (`None` without one; the whole `None` when it is malformed).
pub(super) fn split_gap(text: &str) -> Option<(&str, Option<SystemTime>)> {
    let Some((before, gap)) = text.rsplit_once(" g") else {
        return Some((text, None));
    };
    let millis: u64 = gap.parse().ok()?;
    let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(millis);
    Some((before, Some(at)))
}

/// The most nodes the admin API lists (the heartbeat bucket holds one record per live node
/// run: a cluster larger than this is still summed whole).
pub const MAX_LISTED_NODES: usize = 1024;

/// Sums the live heartbeat records of `nodes` into the counters' totals and lists them
/// (`own_key`: this node run's record); each live record's key and up to when its run is known
/// to have received every message: when the record was written (the NATS server's time), or
/// where its messages not replayed yet start, if earlier.
pub(super) async fn sum_totals(
    nodes: &kv::Store,
    counters: &ClusterCounters,
    own_key: &str,
) -> Vec<(String, SystemTime)> {
    let mut keys = match nodes.keys().await {
        Ok(keys) => keys,
        Err(e) => {
            debug!(error = %e, "cluster: heartbeats not listed");
            return Vec::new();
        }
    };
    let (mut beats, mut total, mut listed) = (Vec::new(), NodeFigures::default(), Vec::new());
    while let Some(Ok(key)) = keys.next().await {
        let entry = nodes.entry(&key).await.ok().flatten();
        let Some(entry) = entry.filter(|e| e.operation == kv::Operation::Put) else {
            continue;
        };
        let text = std::str::from_utf8(&entry.value).ok();
        if let Some((figures, unreplayed_from)) = text.and_then(parse_heartbeat) {
            total.add(&figures);
            let written = SystemTime::from(entry.created);
            if listed.len() < MAX_LISTED_NODES {
                listed.push(figures.row(&key, key == own_key, written));
            }
            beats.push((key, unreplayed_from.map_or(written, |at| at.min(written))));
        }
    }
    listed.sort_by(|a, b| (&a.node_id, &a.run).cmp(&(&b.node_id, &b.run)));
    let totals = &counters.totals;
    *totals.listed.lock().unwrap_or_else(|p| p.into_inner()) = listed;
    ClusterCounters::set(&totals.nodes, beats.len() as u64);
    ClusterCounters::set(&totals.clients, total.clients);
    ClusterCounters::set(&totals.sessions, total.sessions);
    ClusterCounters::set(&totals.subscriptions, total.subscriptions);
    ClusterCounters::set(&totals.received, total.received);
    ClusterCounters::set(&totals.sent, total.sent);
    beats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_round_trip_and_junk_is_refused() {
        let figures = NodeFigures {
            clients: 3,
            sessions: 5,
            subscriptions: 7,
            received: 11,
            sent: 13,
        };
        assert_eq!(NodeFigures::decode(&figures.encode()), Some(figures));
        for junk in ["", "alive", "1 2 3 4", "1 2 3 4 5 6", "1 2 x 4 5"] {
            assert_eq!(NodeFigures::decode(junk), None, "{junk}");
        }
    }

    #[test]
    fn a_heartbeat_carries_where_its_messages_not_replayed_start() {
        let figures = NodeFigures {
            clients: 1,
            sent: 9,
            ..NodeFigures::default()
        };
        assert_eq!(heartbeat_value(&figures, None), "1 0 0 0 9");
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_796_626_330_176);
        let value = heartbeat_value(&figures, Some(at));
        assert_eq!(value, "1 0 0 0 9 g1796626330176");
        assert_eq!(parse_heartbeat(&value), Some((figures, Some(at))));
        assert_eq!(parse_heartbeat("1 0 0 0 9"), Some((figures, None)));
        for junk in ["1 0 0 0 9 gx", "1 0 0 0 g5", "g5", "1 0 0 0 9 7"] {
            assert_eq!(parse_heartbeat(junk), None, "{junk}");
        }
    }

    #[test]
    fn a_row_names_the_node_and_its_run_from_the_heartbeat_key() {
        let figures = NodeFigures {
            clients: 2,
            ..NodeFigures::default()
        };
        let at = SystemTime::UNIX_EPOCH;
        // A node id may itself hold dots: the run is the part after the last one.
        let row = figures.row("site.a.00000000000000ab", true, at);
        assert_eq!(
            (row.node_id.as_str(), row.run.as_str()),
            ("site.a", "00000000000000ab")
        );
        assert!(row.this_node);
        assert_eq!(row.clients, 2);
        let odd = figures.row("nodot", false, at);
        assert_eq!((odd.node_id.as_str(), odd.run.as_str()), ("nodot", ""));
    }
}
