//! `[[bridges]]` against real remote brokers: Debian's mosquitto (started by the test on a free
//! loopback port with its own config file) and another RingMQ (plain and TLS). Every wait is
//! bounded; nothing asserts on timing.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use codec::{QoS, ReasonCode};
use ringmq::config::{default_raw, parse_raw};

use crate::client::{RawClient, V5, V311, connect_packet, persistent_connect, s};
use crate::harness::{TestBroker, wait_until};
use crate::passwords::passwd_file;
use crate::pki::TestPki;
use crate::ports::free_port;

/// How long "no second copy arrives" is watched for.
const NO_ECHO: Duration = Duration::from_millis(500);

/// A mosquitto broker on a free loopback port, stopped at drop. Its sessions persist across
/// [`Mosquitto::stop`] and [`Mosquitto::restart`] (persistence on, saved at SIGTERM).
struct Mosquitto {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

impl Mosquitto {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = format!(
            "listener {port} 127.0.0.1\nallow_anonymous true\nuser root\npersistence true\n\
             persistence_location {}/\nlog_dest stderr\nlog_type all\n",
            dir.path().display()
        );
        std::fs::write(dir.path().join("mosquitto.conf"), config).unwrap();
        let mut mosquitto = Self {
            dir,
            port,
            child: None,
        };
        mosquitto.restart();
        mosquitto
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Starts the process (again) and waits until it accepts connections.
    fn restart(&mut self) {
        assert!(self.child.is_none(), "mosquitto already runs");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("mosquitto.log"))
            .unwrap();
        let child = Command::new(mosquitto_binary())
            .arg("-c")
            .arg(self.dir.path().join("mosquitto.conf"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("mosquitto runs (Debian package `mosquitto`, scripts/test.d/00-tools.sh)");
        self.child = Some(child);
        let addr = self.addr();
        wait_until("mosquitto to listen", || TcpStream::connect(addr).ok());
    }

    /// SIGTERM (mosquitto saves its sessions) and waits for the process to end.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let _ = child.wait();
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.path().join("mosquitto.log"));
            eprintln!("mosquitto log:\n{}", log.unwrap_or_default());
        }
    }
}

fn mosquitto_binary() -> PathBuf {
    let debian = Path::new("/usr/sbin/mosquitto");
    if debian.exists() {
        debian.to_owned()
    } else {
        PathBuf::from("mosquitto")
    }
}

/// One `[[bridges]]` table with quick reconnects, the given topic rules and `extra` keys.
fn bridge(name: &str, address: SocketAddr, protocol: &str, topics: &str, extra: &str) -> String {
    format!(
        "[[bridges]]\nname = \"{name}\"\naddress = \"{address}\"\nclient_id = \"bridge-{name}\"\n\
         protocol = \"{protocol}\"\nkeep_alive = 10\nreconnect_min_ms = 100\n\
         reconnect_max_ms = 1000\ntopics = [{topics}]\n{extra}"
    )
}

/// Out with a remote prefix, in (QoS 2) with both prefixes, both without prefixes.
const THREE_WAYS: &str = r#"
  { pattern = "sensors/#", direction = "out", qos = 1, remote_prefix = "edge1/" },
  { pattern = "cmd/#", direction = "in", qos = 2, local_prefix = "cloud/", remote_prefix = "fleet/" },
  { pattern = "both/#", direction = "both", qos = 1 },
"#;

/// Waits until bridge `name` has both connections up and its subscriptions acknowledged.
fn wait_connected(broker: &TestBroker, name: &str) {
    wait_until(&format!("bridge {name} connected"), || {
        broker
            .bridge_stats()
            .into_iter()
            .find(|s| s.name == name && s.connected)
    });
}

/// Waits until `figures` holds for bridge `name`.
fn wait_stats(
    broker: &TestBroker,
    name: &str,
    what: &str,
    figures: impl Fn(&::bridge::BridgeStats) -> bool,
) {
    wait_until(what, || {
        broker
            .bridge_stats()
            .into_iter()
            .find(|s| s.name == name && figures(s))
    });
}

/// Messages cross out, in and both ways with their prefixes mapped; a `both` message crosses
/// once and is not echoed back.
fn crosses_three_ways(protocol: &str, remote_protocol: codec::ProtocolVersion, extra: &str) {
    let remote = Mosquitto::start();
    let mut remote_sub = RawClient::connected_clean(remote.addr(), remote_protocol, "remote-sub");
    remote_sub.subscribe("edge1/#", QoS::AtLeastOnce);
    remote_sub.subscribe("both/#", QoS::AtLeastOnce);
    let local =
        TestBroker::with_config(&bridge("cloud", remote.addr(), protocol, THREE_WAYS, extra));
    wait_connected(&local, "cloud");
    let mut local_sub = RawClient::connected_clean(local.addr(), V5, "local-sub");
    local_sub.subscribe("cloud/#", QoS::ExactlyOnce);
    local_sub.subscribe("both/#", QoS::AtLeastOnce);
    let mut local_pub = RawClient::connected_clean(local.addr(), V5, "local-pub");
    let mut remote_pub = RawClient::connected_clean(remote.addr(), remote_protocol, "remote-pub");

    let reason = local_pub.publish_simple("sensors/t1", b"21.5", QoS::AtLeastOnce);
    assert_eq!(reason, ReasonCode::Success);
    let out = remote_sub.expect_publish_on("edge1/sensors/t1");
    assert_eq!((out.payload(), out.qos), (&b"21.5"[..], QoS::AtLeastOnce));
    remote_sub.acknowledge(&out);

    remote_pub.publish_simple("fleet/cmd/reboot", b"now", QoS::ExactlyOnce);
    let inward = local_sub.expect_publish_on("cloud/cmd/reboot");
    assert_eq!(
        (inward.payload(), inward.qos),
        (&b"now"[..], QoS::ExactlyOnce)
    );
    local_sub.acknowledge(&inward);

    local_pub.publish_simple("both/a", b"from-local", QoS::AtLeastOnce);
    for client in [&mut remote_sub, &mut local_sub] {
        let copy = client.expect_publish_on("both/a");
        client.acknowledge(&copy);
    }
    remote_pub.publish_simple("both/b", b"from-remote", QoS::AtLeastOnce);
    for client in [&mut local_sub, &mut remote_sub] {
        let copy = client.expect_publish_on("both/b");
        client.acknowledge(&copy);
    }
    local_sub.expect_silence(NO_ECHO);
    remote_sub.expect_silence(NO_ECHO);
    wait_stats(&local, "cloud", "two messages each way", |s| {
        s.messages_out == 2 && s.messages_in == 2 && s.dropped == 0
    });
}

#[test]
fn bridge_to_mosquitto_over_5_0_crosses_three_ways_without_echo() {
    crosses_three_ways("5.0", V5, "");
}

#[test]
fn bridge_to_mosquitto_over_3_1_1_with_the_bridge_marker_crosses_without_echo() {
    crosses_three_ways("3.1.1", V311, "");
}

/// Without the marker mosquitto sends the bridge its own `both` message back: the echo guard
/// drops it.
#[test]
fn bridge_to_mosquitto_over_3_1_1_without_the_marker_drops_the_echo() {
    crosses_three_ways("3.1.1", V311, "try_private = false\n");
}

#[test]
fn bridge_keeps_qos1_messages_published_while_the_remote_is_down_and_delivers_them_in_order() {
    let mut remote = Mosquitto::start();
    let remote_addr = remote.addr();
    let subscriber =
        move || RawClient::connected(remote_addr, persistent_connect(V311, "remote-sub", 0));
    let mut sub = subscriber();
    sub.subscribe("edge/#", QoS::AtLeastOnce);
    let rule = r#"{ pattern = "data/#", direction = "out", qos = 1, remote_prefix = "edge/" }"#;
    let local = TestBroker::with_config(&bridge("up", remote.addr(), "3.1.1", rule, ""));
    wait_connected(&local, "up");
    let mut publisher = RawClient::connected_clean(local.addr(), V5, "publisher");
    publisher.publish_simple("data/first", b"first", QoS::AtLeastOnce);
    let first = sub.expect_publish_on("edge/data/first");
    sub.acknowledge(&first);
    sub.drop_abruptly();

    remote.stop();
    wait_stats(&local, "up", "the bridge to notice", |s| !s.connected);
    for n in 0..20 {
        let reason =
            publisher.publish_simple("data/seq", n.to_string().as_bytes(), QoS::AtLeastOnce);
        assert_eq!(
            reason,
            ReasonCode::Success,
            "the local broker takes message {n}"
        );
    }
    remote.restart();
    let mut sub = subscriber();
    let mut received: Vec<String> = Vec::new();
    while received.len() < 20 {
        let publish = sub.expect_publish();
        sub.acknowledge(&publish);
        let payload = String::from_utf8(publish.payload().to_vec()).unwrap();
        if publish.topic() == "edge/data/seq" && !received.contains(&payload) {
            received.push(payload);
        }
    }
    let expected: Vec<String> = (0..20).map(|n: i32| n.to_string()).collect();
    assert_eq!(received, expected, "none lost, in publish order");
    wait_stats(&local, "up", "a reconnect counted", |s| {
        s.connected && s.reconnects >= 1 && s.messages_out >= 21
    });
}

/// RingMQ to RingMQ over TLS (rcgen certificates), 5.0 and 3.1.1: a RingMQ remote refuses
/// the 3.1.1 bridge marker, and the bridge connects again without it; a `both` message still
/// crosses once.
#[test]
fn bridge_to_ringmq_over_tls_on_both_protocols() {
    let pki = TestPki::new();
    let remote = TestBroker::with_config(&format!(
        "[[listeners.tls]]\nbind = \"127.0.0.1:0\"\n{}",
        pki.listener_keys()
    ));
    let tls = format!(
        "tls = true\ntls_ca_file = {:?}\n",
        pki.ca.cert.display().to_string()
    );
    for (index, protocol) in ["5.0", "3.1.1"].into_iter().enumerate() {
        let name = format!("tls{index}");
        let topics = r#"
          { pattern = "sensors/#", direction = "out", qos = 1, remote_prefix = "edge1/" },
          { pattern = "cmd/#", direction = "in", qos = 1, local_prefix = "cloud/", remote_prefix = "fleet/" },
          { pattern = "both/#", direction = "both", qos = 1 },
        "#;
        let config = bridge(&name, remote.addr_of("tls"), protocol, topics, &tls);
        let local = TestBroker::with_config(&config);
        wait_connected(&local, &name);
        let mut remote_sub = RawClient::connected_clean(remote.addr(), V5, "remote-sub");
        remote_sub.subscribe("edge1/#", QoS::AtLeastOnce);
        let mut local_sub = RawClient::connected_clean(local.addr(), V5, "local-sub");
        local_sub.subscribe("cloud/#", QoS::AtLeastOnce);

        let mut local_pub = RawClient::connected_clean(local.addr(), V5, "local-pub");
        local_pub.publish_simple("sensors/x", protocol.as_bytes(), QoS::AtLeastOnce);
        let out = remote_sub.expect_publish_on("edge1/sensors/x");
        assert_eq!(out.payload(), protocol.as_bytes());
        remote_sub.acknowledge(&out);

        let mut remote_pub = RawClient::connected_clean(remote.addr(), V5, "remote-pub");
        remote_pub.publish_simple("fleet/cmd/go", protocol.as_bytes(), QoS::AtLeastOnce);
        let inward = local_sub.expect_publish_on("cloud/cmd/go");
        assert_eq!(inward.payload(), protocol.as_bytes());
        local_sub.acknowledge(&inward);

        // 5.0: No Local; 3.1.1 (the marker refused): the echo guard. Either way once.
        local_sub.subscribe("both/#", QoS::AtLeastOnce);
        local_pub.publish_simple("both/x", protocol.as_bytes(), QoS::AtLeastOnce);
        let copy = local_sub.expect_publish_on("both/x");
        local_sub.acknowledge(&copy);
        local_sub.expect_silence(NO_ECHO);
        wait_stats(&local, &name, "two messages out, one in", |s| {
            s.messages_out == 2 && s.messages_in == 1
        });
    }
}

/// What SIGHUP does with `[[bridges]]`: an added bridge starts, a changed one restarts with
/// its new rules only, a removed one stops.
#[test]
fn reload_starts_restarts_and_stops_bridges() {
    let remote = TestBroker::start();
    let local = TestBroker::start();
    assert!(local.bridge_stats().is_empty());
    let mut remote_sub = RawClient::connected_clean(remote.addr(), V5, "remote-sub");
    remote_sub.subscribe("a/#", QoS::AtLeastOnce);
    remote_sub.subscribe("b/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(local.addr(), V5, "publisher");
    let rule =
        |pattern: &str| format!("{{ pattern = \"{pattern}\", direction = \"out\", qos = 1 }}");

    local.apply_reloadable(&bridge("r", remote.addr(), "5.0", &rule("a/#"), ""));
    wait_connected(&local, "r");
    publisher.publish_simple("a/1", b"1", QoS::AtLeastOnce);
    let got = remote_sub.expect_publish();
    assert_eq!(got.topic(), "a/1");
    remote_sub.acknowledge(&got);

    local.apply_reloadable(&bridge("r", remote.addr(), "5.0", &rule("b/#"), ""));
    wait_connected(&local, "r");
    publisher.publish_simple("a/2", b"2", QoS::AtLeastOnce);
    publisher.publish_simple("b/2", b"2", QoS::AtLeastOnce);
    let got = remote_sub.expect_publish();
    assert_eq!(
        got.topic(),
        "b/2",
        "the old rule's subscription went with the restart"
    );
    remote_sub.acknowledge(&got);
    remote_sub.expect_silence(NO_ECHO);

    local.apply_reloadable("");
    assert!(local.bridge_stats().is_empty());
    publisher.publish_simple("b/3", b"3", QoS::AtLeastOnce);
    remote_sub.expect_silence(NO_ECHO);
}

/// The bridge logs in to a local broker that has a password file (`local_username`,
/// `local_password`) and to a remote that asks for a password and a client certificate; a QoS 2
/// message crosses as QoS 2.
#[test]
fn bridge_logs_in_on_both_sides_and_carries_qos2_out() {
    let pki = TestPki::new();
    let dir = pki.dir.path();
    let client = pki.ca.client(dir, "edge");
    let (remote_users, local_users) = (dir.join("remote.passwd"), dir.join("local.passwd"));
    passwd_file(&remote_users, "edge", "remote-secret");
    passwd_file(&local_users, "bridge", "local-secret");
    let remote = TestBroker::with_config(&format!(
        "[auth]\npassword_file = {:?}\nallow_anonymous = true\n\
         [[listeners.tls]]\nbind = \"127.0.0.1:0\"\n{}client_ca = {:?}\nrequire_client_cert = true\n",
        remote_users.display().to_string(),
        pki.listener_keys(),
        pki.ca.cert.display().to_string()
    ));
    let keys = format!(
        "username = \"edge\"\npassword = \"remote-secret\"\ntls = true\ntls_ca_file = {:?}\n\
         tls_cert_file = {:?}\ntls_key_file = {:?}\nlocal_username = \"bridge\"\n\
         local_password = \"local-secret\"\n",
        pki.ca.cert.display().to_string(),
        client.cert.display().to_string(),
        client.key.display().to_string()
    );
    let rule = r#"{ pattern = "q2/#", direction = "out", qos = 2 }"#;
    let local = TestBroker::with_config(&format!(
        "[auth]\npassword_file = {:?}\nallow_anonymous = false\n{}",
        local_users.display().to_string(),
        bridge("auth", remote.addr_of("tls"), "5.0", rule, &keys)
    ));
    wait_connected(&local, "auth");
    let mut remote_sub = RawClient::connected_clean(remote.addr(), V5, "remote-sub");
    remote_sub.subscribe("q2/#", QoS::ExactlyOnce);
    let mut login = connect_packet(V5, "local-pub", true);
    login.username = Some(s("bridge"));
    login.password = Some(bytes::Bytes::from_static(b"local-secret"));
    let mut publisher = RawClient::connected(local.addr(), login);
    let reason = publisher.publish_simple("q2/x", b"exactly", QoS::ExactlyOnce);
    assert_eq!(reason, ReasonCode::Success);
    let got = remote_sub.expect_publish_on("q2/x");
    assert_eq!(
        (got.payload(), got.qos),
        (&b"exactly"[..], QoS::ExactlyOnce)
    );
    remote_sub.acknowledge(&got);
    wait_stats(&local, "auth", "one QoS 2 message out", |s| {
        s.messages_out == 1
    });
}

#[test]
fn bridge_figures_are_published_under_sys() {
    let remote = TestBroker::start();
    let rule = r#"{ pattern = "a/#", direction = "out", qos = 1 }"#;
    let config = format!(
        "[sys]\ninterval = 1\n{}",
        bridge("s", remote.addr(), "5.0", rule, "")
    );
    let local = TestBroker::with_config(&config);
    wait_connected(&local, "s");
    let mut watcher = RawClient::connected_clean(local.addr(), V5, "watcher");
    watcher.subscribe("$SYS/broker/bridges/s/connected", QoS::AtMostOnce);
    wait_until("$SYS shows the bridge connected", || {
        let publish = watcher.expect_publish_on("$SYS/broker/bridges/s/connected");
        (publish.payload() == b"1").then_some(())
    });
}

#[test]
fn bad_bridge_configs_are_refused_naming_the_key() {
    let error = |text: &str| {
        let mut raw = default_raw().unwrap();
        raw.overlay(parse_raw("test", text).unwrap());
        raw.validate().unwrap_err().to_string()
    };
    let addr: SocketAddr = "127.0.0.1:1883".parse().unwrap();
    let good = bridge(
        "b",
        addr,
        "5.0",
        r#"{ pattern = "x/#", direction = "out" }"#,
        "",
    );
    let sideways = good.replace("\"out\"", "\"sideways\"");
    assert!(error(&sideways).contains("bridges.topics.direction"));
    let no_address = good.replace("address = \"127.0.0.1:1883\"\n", "");
    assert!(error(&no_address).contains("bridges.address"));
    let twice = format!("{good}{good}");
    let message = error(&twice);
    assert!(
        message.contains("bridges.name") && message.contains("\"b\""),
        "{message}"
    );
}

/// Two RingMQ brokers each bridge `fleet/#` both ways to one mosquitto (a star): a message
/// published on one edge reaches the other edge and mosquitto's subscriber exactly once, and
/// nothing comes back around.
#[test]
fn two_bridges_to_one_mosquitto_carry_each_message_once_without_a_loop() {
    let hub = Mosquitto::start();
    let mut hub_sub = RawClient::connected_clean(hub.addr(), V5, "hub-sub");
    hub_sub.subscribe("fleet/#", QoS::AtLeastOnce);
    let rule = r#"{ pattern = "fleet/#", direction = "both", qos = 1 }"#;
    let edge_a = TestBroker::with_config(&bridge("a", hub.addr(), "5.0", rule, ""));
    let edge_b = TestBroker::with_config(&bridge("b", hub.addr(), "5.0", rule, ""));
    wait_connected(&edge_a, "a");
    wait_connected(&edge_b, "b");
    let mut sub_a = RawClient::connected_clean(edge_a.addr(), V5, "sub-a");
    sub_a.subscribe("fleet/#", QoS::AtLeastOnce);
    let mut sub_b = RawClient::connected_clean(edge_b.addr(), V5, "sub-b");
    sub_b.subscribe("fleet/#", QoS::AtLeastOnce);
    let mut pub_a = RawClient::connected_clean(edge_a.addr(), V5, "pub-a");
    assert_eq!(
        pub_a.publish_simple("fleet/1", b"from-a", QoS::AtLeastOnce),
        ReasonCode::Success
    );
    for client in [&mut sub_a, &mut sub_b, &mut hub_sub] {
        let copy = client.expect_publish_on("fleet/1");
        assert_eq!(copy.payload(), b"from-a");
        client.acknowledge(&copy);
    }
    let mut pub_b = RawClient::connected_clean(edge_b.addr(), V5, "pub-b");
    pub_b.publish_simple("fleet/2", b"from-b", QoS::AtLeastOnce);
    for client in [&mut sub_a, &mut sub_b, &mut hub_sub] {
        let copy = client.expect_publish_on("fleet/2");
        assert_eq!(copy.payload(), b"from-b");
        client.acknowledge(&copy);
    }
    for client in [&mut sub_a, &mut sub_b, &mut hub_sub] {
        client.expect_silence(NO_ECHO);
    }
    wait_stats(&edge_a, "a", "one out, one in", |s| {
        s.messages_out == 1 && s.messages_in == 1
    });
    wait_stats(&edge_b, "b", "one out, one in", |s| {
        s.messages_out == 1 && s.messages_in == 1
    });
}

/// The bridge's local connection comes from 127.0.0.1 like other local clients; when their
/// failed logins ban 127.0.0.1, the bridge still (re)connects to this broker: it registers its
/// exact source address with the `[ip]` guard, which neither limits nor bans it.
#[test]
fn bridge_reconnects_locally_while_its_address_is_banned_for_others() {
    let mut remote = Mosquitto::start();
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("local.passwd");
    passwd_file(&users, "bridge", "local-secret");
    let rule = r#"{ pattern = "data/#", direction = "out", qos = 1 }"#;
    let local = TestBroker::with_config(&format!(
        "[auth]\npassword_file = {:?}\n[ip]\nban_after_auth_failures = 2\n\
         ban_user_after_auth_failures = 0\nban_duration = 600\n{}",
        users.display().to_string(),
        bridge(
            "up",
            remote.addr(),
            "5.0",
            rule,
            "local_username = \"bridge\"\nlocal_password = \"local-secret\"\n"
        )
    ));
    wait_connected(&local, "up");
    remote.stop();
    wait_stats(&local, "up", "the bridge to notice", |s| !s.connected);
    let here = crate::ip::loopback(1);
    for _ in 0..2 {
        assert_eq!(
            crate::ip::try_connect(&local, here, Some(("mallory", "guess"))),
            Some(ReasonCode::BadUserNameOrPassword)
        );
    }
    assert_eq!(
        crate::ip::try_connect(&local, here, Some(("bridge", "local-secret"))),
        None,
        "127.0.0.1 is banned for other clients"
    );
    remote.restart();
    wait_connected(&local, "up");
    assert_eq!(local.ip_bans_total(), 1);
}
