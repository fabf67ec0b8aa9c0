//! Validation of `[[bridges]]`: defaults, and errors that name the key and the bridge.

use std::path::PathBuf;

use super::*;
use crate::config::{default_raw, parse_raw};

const CLOUD: &str = r#"
[[bridges]]
name = "cloud"
address = "broker.example.com:8883"
client_id = "edge-1"
topics = [
  { pattern = "sensors/#", direction = "out", qos = 1, remote_prefix = "edge1/" },
  { pattern = "cmd/#", direction = "in", qos = 2 },
]
"#;

fn validated(text: &str) -> Result<Vec<BridgeSettings>, ConfigError> {
    let mut raw = default_raw().expect("defaults parse");
    raw.overlay(parse_raw("t", text)?);
    raw.validate().map(|config| config.bridges)
}

fn error(text: &str) -> String {
    validated(text)
        .expect_err("the config is refused")
        .to_string()
}

#[test]
fn no_bridges_by_default() {
    assert!(validated("").expect("defaults validate").is_empty());
}

#[test]
fn a_bridge_takes_the_documented_defaults() {
    let bridges = validated(CLOUD).expect("valid");
    let bridge = &bridges[0];
    assert_eq!(bridge.name, "cloud");
    assert_eq!(bridge.protocol, ProtocolVersion::V5);
    assert_eq!(bridge.keep_alive, 60);
    assert!(!bridge.clean_start);
    assert!(bridge.try_private);
    assert_eq!(bridge.tls, None);
    assert_eq!(bridge.reconnect_min, Duration::from_secs(1));
    assert_eq!(bridge.reconnect_max, Duration::from_secs(60));
    assert_eq!(bridge.max_inflight, 100);
    assert_eq!(bridge.local_client_id, "ringmq-bridge-cloud");
    assert_eq!(bridge.username, None);
    assert_eq!(
        bridge.topics[0],
        TopicRule {
            pattern: "sensors/#".into(),
            direction: Direction::Out,
            qos: QoS::AtLeastOnce,
            local_prefix: String::new(),
            remote_prefix: "edge1/".into(),
        }
    );
    assert_eq!(bridge.topics[1].direction, Direction::In);
    assert_eq!(bridge.topics[1].qos, QoS::ExactlyOnce);
}

#[test]
fn passwords_stay_out_of_debug_output() {
    let text = with_keys("password = \"hunter2\"");
    let bridges = validated(&text).expect("valid");
    assert!(!format!("{bridges:?}").contains("hunter2"));
    assert_eq!(bridges[0].password, Some(Secret("hunter2".into())));
}

#[test]
fn an_unknown_direction_names_the_key_and_the_bridge() {
    let message = error(&CLOUD.replace("\"in\"", "\"sideways\""));
    assert!(message.contains("bridges.topics.direction"), "{message}");
    assert!(
        message.contains("cloud") && message.contains("sideways"),
        "{message}"
    );
}

#[test]
fn a_missing_address_names_the_key() {
    let message = error(&CLOUD.replace("address = \"broker.example.com:8883\"\n", ""));
    assert!(message.contains("bridges.address"), "{message}");
    let message = error(&CLOUD.replace("broker.example.com:8883", "no-port"));
    assert!(message.contains("bridges.address"), "{message}");
}

#[test]
fn credentials_in_the_address_are_refused_unshown() {
    for address in [
        "edge:hunter2@broker.example.com:8883",
        "hunter2@broker.example.com:8883",
    ] {
        let message = error(&CLOUD.replace("broker.example.com:8883", address));
        assert!(message.contains("bridges.address"), "{message}");
        assert!(message.contains("username and password"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
    }
}

#[test]
fn a_duplicate_name_is_refused() {
    let twice = format!("{CLOUD}{CLOUD}");
    let message = error(&twice);
    assert!(
        message.contains("bridges.name") && message.contains("cloud"),
        "{message}"
    );
}

/// `CLOUD` with `keys` added to its table.
fn with_keys(keys: &str) -> String {
    CLOUD.replace("client_id", &format!("{keys}\nclient_id"))
}

#[test]
fn bad_values_name_their_keys() {
    let cases = [
        (CLOUD.replace("qos = 2", "qos = 3"), "bridges.topics.qos"),
        (CLOUD.replace("cmd/#", "cmd/#/x"), "bridges.topics.pattern"),
        (
            CLOUD.replace("\"edge1/\"", "\"+/\""),
            "bridges.topics.remote_prefix",
        ),
        (CLOUD.replace("\"cloud\"", "\"a/b\""), "bridges.name"),
        (
            CLOUD.replace("client_id = \"edge-1\"\n", ""),
            "bridges.client_id",
        ),
        (CLOUD.replace("topics = [", "tpoics = ["), "tpoics"),
        (with_keys("protocol = \"3.1\""), "bridges.protocol"),
        (with_keys("tls = true"), "bridges.tls_ca_file"),
        (with_keys("keep_alive = 70000"), "bridges.keep_alive"),
        (
            with_keys("reconnect_min_ms = 5000\nreconnect_max_ms = 10"),
            "bridges.reconnect_max_ms",
        ),
    ];
    for (text, key) in cases {
        let message = error(&text);
        assert!(message.contains(key), "{key}: {message}");
    }
}

#[test]
fn bridges_need_a_tcp_listener() {
    let text = format!("[listeners]\ntcp = []\n[[listeners.ws]]\nbind = \"127.0.0.1:0\"\n{CLOUD}");
    let message = error(&text);
    assert!(message.contains("`bridges`"), "{message}");
}

#[test]
fn tls_keys_are_validated() {
    let text = with_keys("tls = true\ntls_ca_file = \"ca.pem\"\ntls_cert_file = \"c.pem\"");
    assert!(error(&text).contains("bridges.tls_cert_file"));
    let text = with_keys("tls = true\ntls_ca_file = \"ca.pem\"\ntls_server_name = \"remote\"");
    let bridge = &validated(&text).expect("valid")[0];
    let tls = bridge.tls.as_ref().expect("tls");
    assert_eq!(tls.ca_file, PathBuf::from("ca.pem"));
    assert_eq!(tls.server_name.as_deref(), Some("remote"));
}
