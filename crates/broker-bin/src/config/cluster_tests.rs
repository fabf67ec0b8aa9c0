//! Validation of `[cluster]`: absent on a single node, defaults, errors that name the key.

use crate::config::{default_raw, parse_raw};

fn load(text: &str) -> Result<crate::config::Config, crate::config::ConfigError> {
    let mut raw = default_raw().unwrap();
    raw.overlay(parse_raw("test", text).unwrap());
    raw.validate()
}

#[test]
fn no_section_is_a_single_node() {
    assert!(load("").unwrap().cluster.is_none());
}

#[test]
fn defaults_fill_the_optional_keys() {
    let config = load("[cluster]\nnode_id = \"n1\"\nnats = [\"nats://127.0.0.1:4222\"]\n").unwrap();
    let cluster = config.cluster.unwrap();
    assert_eq!(cluster.node_id, "n1");
    assert_eq!(cluster.max_outbound_messages, 65_536);
    assert_eq!(cluster.subject_prefix, "ringmq");
    assert_eq!(cluster.replicas, 1);
    assert_eq!(cluster.node_timeout, std::time::Duration::from_secs(10));
    assert_eq!(
        cluster.replay_window,
        Some(std::time::Duration::from_secs(60))
    );
    assert_eq!(cluster.replay_max_bytes, 64 << 20);
    assert_eq!(cluster.ack_timeout, std::time::Duration::from_secs(10));
    assert!(
        !cluster.ack_while_disconnected,
        "acks wait for JetStream by default"
    );
    let memory =
        "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nack_while_disconnected = true\n";
    assert!(
        load(memory)
            .unwrap()
            .cluster
            .unwrap()
            .ack_while_disconnected
    );
    assert!(
        !cluster.admit_unchecked_sessions,
        "a persistent session's CONNECT is refused when unchecked by default"
    );
    let admitting =
        "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nadmit_unchecked_sessions = true\n";
    assert!(
        load(admitting)
            .unwrap()
            .cluster
            .unwrap()
            .admit_unchecked_sessions
    );
    assert!(
        cluster.qos2_journal,
        "QoS 2 deliveries journaled by default"
    );
    let unjournaled =
        "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nqos2_journal = false\n";
    assert!(!load(unjournaled).unwrap().cluster.unwrap().qos2_journal);
    assert_eq!(cluster.qos2_journal_wait, None, "until kept by default");
    let bounded =
        "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nqos2_journal_wait_ms = 5000\n";
    let wait = load(bounded).unwrap().cluster.unwrap().qos2_journal_wait;
    assert_eq!(wait, Some(std::time::Duration::from_secs(5)));
    let off = "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nreplay_window_ms = 0\n";
    assert_eq!(load(off).unwrap().cluster.unwrap().replay_window, None);
}

#[test]
fn errors_name_the_key() {
    let cases = [
        ("[cluster]\nnats = [\"nats://a:1\"]\n", "cluster.node_id"),
        (
            "[cluster]\nnode_id = \"a.b\"\nnats = [\"nats://a:1\"]\n",
            "cluster.node_id",
        ),
        ("[cluster]\nnode_id = \"n1\"\n", "cluster.nats"),
        (
            "[cluster]\nnode_id = \"n1\"\nnats = [\"http://a b\"]\n",
            "cluster.nats",
        ),
        (
            "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nmax_outbound_messages = 0\n",
            "cluster.max_outbound_messages",
        ),
        (
            "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nsubject_prefix = \"a.>\"\n",
            "cluster.subject_prefix",
        ),
        (
            "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nreplicas = 6\n",
            "cluster.replicas",
        ),
        (
            "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nnode_timeout_ms = 10\n",
            "cluster.node_timeout_ms",
        ),
        (
            "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nreplay_window_ms = 5\n",
            "cluster.replay_window_ms",
        ),
        (
            "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nreplay_max_bytes = 5\n",
            "cluster.replay_max_bytes",
        ),
        (
            "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\nack_timeout_ms = 999\n",
            "cluster.ack_timeout_ms",
        ),
        (
            "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\ntls_ca_file = \"/nonexistent/ca.pem\"\n",
            "cluster.tls_ca_file",
        ),
        (
            "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://a:1\"]\ntls_cert_file = \"Cargo.toml\"\n",
            "cluster.tls_cert_file",
        ),
    ];
    for (text, key) in cases {
        let error = load(text).unwrap_err().to_string();
        assert!(error.contains(key), "{text}: {error}");
    }
}
