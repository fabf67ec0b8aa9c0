//! `[cluster]`'s typed settings: what the broker's config layer validates from TOML (defaults,
//! key names and errors stay there) and hands to the link.

/// `[cluster]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// `cluster.node_id`: unique per node (letters, digits, `-`, `_`).
    pub node_id: String,
    /// `cluster.nats`: the NATS servers (one NATS cluster), as `nats://host:port` URLs.
    pub nats: Vec<String>,
    /// `cluster.max_outbound_messages`: messages waiting to go to NATS; beyond, dropped and
    /// counted.
    pub max_outbound_messages: usize,
    /// `cluster.subject_prefix`: the subjects' first token(s).
    pub subject_prefix: String,
    /// `cluster.replicas`: copies JetStream keeps of the cluster's buckets.
    pub replicas: usize,
    /// `cluster.node_timeout_ms`: a node without a heartbeat this long is gone.
    pub node_timeout: std::time::Duration,
    /// `cluster.replay_window_ms`: how long the stream `<base>_messages` keeps QoS 1/2
    /// messages for replays after a NATS connection loss (`None`: 0, not kept).
    pub replay_window: Option<std::time::Duration>,
    /// `cluster.replay_max_bytes`: the most bytes that stream keeps.
    pub replay_max_bytes: u64,
    /// `cluster.ack_timeout_ms`: the longest a QoS 1/2 publisher's acknowledgement waits for
    /// JetStream to keep its message (publishes made again meanwhile); past it the publisher
    /// is refused (docs/cluster.md, "Guarantees").
    pub ack_timeout: std::time::Duration,
    /// `cluster.ack_while_disconnected`: a QoS 1/2 publish handled while NATS is down is
    /// acknowledged at once, its message held in the node's memory until NATS is back (`true`),
    /// or waits for JetStream like any other, refused past `ack_timeout` (`false`, the
    /// default: nothing is acknowledged before JetStream keeps it).
    pub ack_while_disconnected: bool,
    /// `cluster.admit_unchecked_sessions`: a CONNECT that resumes a session or leaves one
    /// behind is admitted when its client id cannot be checked across nodes (NATS down, or its
    /// owner record not read or written in time; `true`), or refused with 0x88 so the client
    /// retries (`false`, the default: a session held on two nodes at once loses or repeats
    /// messages). A clean session's CONNECT is admitted either way.
    pub admit_unchecked_sessions: bool,
    /// `cluster.qos2_journal`: QoS 2 deliveries to mirrored sessions are written to the
    /// delivery journal before they leave (`true`, the default: exactly once across a node's
    /// death, docs/cluster.md), or not (`false`: cheaper, and such a message may reach its
    /// client twice after its node's death). Needs the replay window.
    pub qos2_journal: bool,
    /// `cluster.qos2_journal_wait_ms`: the longest a journaled QoS 2 delivery waits for
    /// JetStream to keep its step before its packet leaves unjournaled; `None` (0, the
    /// default): until kept, so that no such message reaches its client twice after its node's
    /// death (the queue of turns waiting, `max_outbound_messages`, still bounds the wait).
    pub qos2_journal_wait: Option<std::time::Duration>,
    /// TLS and credentials for the NATS connections.
    pub security: NatsSecurity,
}

/// `cluster.tls_ca_file`, `tls_cert_file`, `tls_key_file`, `creds_file`: how a node proves
/// itself to NATS and checks the servers (user and password or a token go in the URLs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NatsSecurity {
    /// CA certificates (PEM) the NATS servers' certificates must chain to; TLS required.
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// The node's client certificate and key (PEM), for servers that verify clients.
    pub tls_client: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// A NATS credentials file (JWT and NKey seed).
    pub creds_file: Option<std::path::PathBuf>,
}

/// Whether the NATS client accepts `url` as a server address; the client's reason if not.
pub fn check_server_url(url: &str) -> Result<(), String> {
    url.parse::<async_nats::ServerAddr>()
        .map(drop)
        .map_err(|e| e.to_string())
}
