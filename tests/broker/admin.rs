//! The admin API (`/api/v1/...`) against a running broker with real clients, through
//! `AdminPort::route` (the operations HTTP server hands it every `/api/` request), and over the
//! operations listener where the answer depends on the store.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use codec::{Packet, ProtocolVersion, QoS, ReasonCode};
use ringmq::admin::{AdminRequest, AdminResponse};
use serde_json::{Value, json};

use crate::client::{RawClient, V5, V311, persistent_connect, pid, publish_packet};
use crate::harness::TestBroker;

/// An admin API request answered by `broker` through `AdminPort::route`: status and JSON body.
pub(crate) fn call(
    broker: &TestBroker,
    method: &str,
    path_and_query: &str,
    body: &str,
) -> (u16, Value) {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let query: Vec<(String, String)> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    let request = AdminRequest {
        method,
        path,
        query: &query,
        body: body.as_bytes(),
    };
    let AdminResponse { status, body } = broker.admin().route(&request).expect("an /api/ path");
    (status, serde_json::from_str(&body).unwrap())
}

fn get(broker: &TestBroker, path: &str) -> Value {
    let (status, body) = call(broker, "GET", path, "");
    assert_eq!(status, 200, "{path}: {body}");
    body
}

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|c| c["client_id"].as_str().unwrap())
        .collect()
}

#[test]
fn clients_are_listed_in_pages_and_shown_one_by_one() {
    let broker = TestBroker::with_config("[runtime]\nshards = 2\n");
    let mut a = RawClient::connected_clean(broker.addr(), V5, "a-client");
    a.subscribe("sensors/#", QoS::AtLeastOnce);
    let _b = RawClient::connected_clean(broker.addr(), ProtocolVersion::V3_1_1, "b-client");
    let c = RawClient::connected(broker.addr(), persistent_connect(V5, "c-client", 600));
    drop(c);
    crate::harness::wait_until("c-client's connection is gone", || {
        let page = get(&broker, "/api/v1/clients/c-client");
        (page["connected"] == false).then_some(())
    });
    let first = get(&broker, "/api/v1/clients?limit=2");
    assert_eq!(ids(&first["clients"]), ["a-client", "b-client"]);
    assert_eq!(first["next"], "b-client");
    let second = get(&broker, "/api/v1/clients?limit=2&after=b-client");
    assert_eq!(ids(&second["clients"]), ["c-client"]);
    assert_eq!(second["next"], Value::Null);
    let a_info = &first["clients"][0];
    assert_eq!(a_info["connected"], true);
    assert_eq!(a_info["protocol"], "5.0");
    assert_eq!(a_info["subscriptions"], 1);
    assert!(
        a_info["address"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
    assert!(a_info["connected_since"].as_u64().unwrap() > 1_700_000_000);
    assert_eq!(first["clients"][1]["protocol"], "3.1.1");
    let detail = get(&broker, "/api/v1/clients/a-client");
    assert_eq!(detail["subscription_list"][0]["filter"], "sensors/#");
    assert_eq!(detail["subscription_list"][0]["qos"], 1);
    assert_eq!(
        get(&broker, "/api/v1/clients/c-client")["session_expiry"],
        600
    );
    let (status, _) = call(&broker, "GET", "/api/v1/clients/nobody", "");
    assert_eq!(status, 404);
}

#[test]
fn a_client_disconnected_by_the_api_gets_the_reason() {
    let broker = TestBroker::start();
    let mut kicked = RawClient::connected_clean(broker.addr(), V5, "kicked");
    let (status, body) = call(&broker, "DELETE", "/api/v1/clients/kicked", "");
    assert_eq!(status, 200, "{body}");
    kicked.expect_disconnect(ReasonCode::AdministrativeAction);
    let mut other = RawClient::connected_clean(broker.addr(), V5, "other");
    let (status, _) = call(&broker, "DELETE", "/api/v1/clients/other?reason=0x9C", "");
    assert_eq!(status, 200);
    other.expect_disconnect(ReasonCode::UseAnotherServer);
    let (status, _) = call(&broker, "DELETE", "/api/v1/clients/kicked", "");
    assert_eq!(status, 404, "no longer connected");
    let _third = RawClient::connected_clean(broker.addr(), V5, "third");
    let (status, body) = call(&broker, "DELETE", "/api/v1/clients/third?reason=0x01", "");
    assert_eq!(status, 400, "0x01 is not a DISCONNECT reason: {body}");
}

#[test]
fn messages_published_by_the_api_reach_subscribers_and_retained_ones_can_be_cleared() {
    let broker = TestBroker::start();
    let mut listener = RawClient::connected_clean(broker.addr(), V5, "listener");
    listener.subscribe("news/#", QoS::AtLeastOnce);
    let body = r#"{"topic": "news/today", "payload": "hello", "qos": 1, "retain": true}"#;
    let (status, answer) = call(&broker, "POST", "/api/v1/publish", body);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(listener.expect_publish_acked().payload(), b"hello");
    let body = r#"{"topic": "news/raw", "payload_base64": "AAEC"}"#;
    assert_eq!(call(&broker, "POST", "/api/v1/publish", body).0, 200);
    assert_eq!(listener.expect_publish_on("news/raw").payload(), [0, 1, 2]);
    let retained = get(&broker, "/api/v1/retained");
    assert_eq!(retained["retained"][0]["topic"], "news/today");
    assert_eq!(retained["retained"][0]["payload_bytes"], 5);
    assert_eq!(
        call(&broker, "DELETE", "/api/v1/retained/news/today", "").0,
        200
    );
    crate::harness::wait_until("the retained message is gone", || {
        let list = get(&broker, "/api/v1/retained");
        list["retained"]
            .as_array()
            .unwrap()
            .is_empty()
            .then_some(())
    });
    for bad in [
        r#"{"topic": "a/#", "payload": "x"}"#,
        r#"{"topic": "$SYS/x", "payload": "x"}"#,
        r#"{"topic": "a", "qos": 3}"#,
        r#"{"topic": "a", "payload": "x", "payload_base64": "eA=="}"#,
        r#"not json"#,
    ] {
        let (status, answer) = call(&broker, "POST", "/api/v1/publish", bad);
        assert_eq!(status, 400, "{bad}: {answer}");
        assert!(answer["error"].is_string());
    }
    broker.assert_serving();
}

#[test]
fn subscriptions_are_listed_and_requests_are_checked() {
    let broker = TestBroker::with_config("[runtime]\nshards = 2\n");
    let mut one = RawClient::connected_clean(broker.addr(), V5, "one");
    one.subscribe("x/1", QoS::AtMostOnce);
    one.subscribe("x/2", QoS::ExactlyOnce);
    let mut two = RawClient::connected_clean(broker.addr(), V5, "two");
    two.subscribe("y/#", QoS::AtLeastOnce);
    let page = get(&broker, "/api/v1/subscriptions?limit=2");
    let list = page["subscriptions"].as_array().unwrap();
    let pairs: Vec<(&str, &str)> = list
        .iter()
        .map(|s| {
            (
                s["client_id"].as_str().unwrap(),
                s["filter"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(pairs, [("one", "x/1"), ("one", "x/2")]);
    let next = &page["next"];
    let path = format!(
        "/api/v1/subscriptions?after_client={}&after_filter={}",
        next["after_client"].as_str().unwrap(),
        next["after_filter"].as_str().unwrap()
    );
    let rest = get(&broker, &path);
    assert_eq!(rest["subscriptions"][0]["filter"], "y/#");
    assert_eq!(rest["subscriptions"][0]["qos"], 1);
    assert_eq!(call(&broker, "GET", "/api/v1/clients?limit=0", "").0, 400);
    assert_eq!(
        call(&broker, "GET", "/api/v1/clients?limit=5000", "").0,
        400
    );
    assert_eq!(call(&broker, "GET", "/api/v1/nothing", "").0, 404);
    assert_eq!(call(&broker, "GET", "/api/v2/clients", "").0, 404);
    let (status, body) = call(&broker, "GET", "/api/v1/cluster/nodes", "");
    assert_eq!(status, 404, "a single node: {body}");
    assert!(body.to_string().contains("not clustered"), "{body}");
    assert_eq!(call(&broker, "POST", "/api/v1/cluster/nodes", "").0, 405);
    assert_eq!(call(&broker, "POST", "/api/v1/clients", "").0, 405);
    assert_eq!(call(&broker, "POST", "/api/v1/reload", "").0, 200);
}

#[test]
fn reload_reads_the_config_source_and_reports_what_waits_for_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ringmq.toml");
    std::fs::write(&file, "[ip]\nmax_connections = 0\n").unwrap();
    let broker = TestBroker::start();
    let config = get(&broker, "/api/v1/config");
    assert_eq!(config["toml"], Value::Null, "no source yet");
    broker.set_config_source(file.clone());
    let config = get(&broker, "/api/v1/config");
    assert!(config["toml"].as_str().unwrap().contains("[listeners]"));
    std::fs::write(
        &file,
        "[ip]\nmax_connections = 50\n[listeners]\ntcp = [\"127.0.0.1:0\", \"127.0.0.2:0\"]\n",
    )
    .unwrap();
    let (status, report) = call(&broker, "POST", "/api/v1/reload", "");
    assert_eq!(status, 200, "{report}");
    assert!(
        report["applied"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k == "ip.max_connections"),
        "{report}"
    );
    assert!(
        report["restart_required"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k == "listeners.tcp"),
        "{report}"
    );
    let config = get(&broker, "/api/v1/config");
    assert!(
        config["toml"]
            .as_str()
            .unwrap()
            .contains("max_connections = 50")
    );
    assert_eq!(config["restart_required"][0], "listeners.tcp");
    std::fs::write(&file, "[ip]\nmax_connections = \"many\"\n").unwrap();
    let (status, report) = call(&broker, "POST", "/api/v1/reload", "");
    assert_eq!(status, 400);
    assert!(
        report["refused"]
            .as_str()
            .unwrap()
            .contains("max_connections"),
        "{report}"
    );
    let config = get(&broker, "/api/v1/config");
    assert!(
        config["toml"]
            .as_str()
            .unwrap()
            .contains("max_connections = 50"),
        "the old one stays"
    );
    broker.assert_serving();
}

/// A reload through the admin API with a changed publish rate and a changed password file:
/// connected clients stay, later logins follow the new file, the new rate is in force.
#[test]
fn a_reload_changes_a_limit_and_the_password_file_while_clients_stay_connected() {
    let dir = tempfile::tempdir().unwrap();
    let passwd = dir.path().join("passwd");
    crate::passwords::passwd_file(&passwd, "alice", "old-password");
    let file = dir.path().join("ringmq.toml");
    let auth = format!(
        "[auth]\npassword_file = {:?}\n",
        passwd.display().to_string()
    );
    std::fs::write(&file, &auth).unwrap();
    let broker = TestBroker::with_config(&auth);
    broker.set_config_source(file.clone());
    let alice = |client_id: &str, password: &str| {
        let mut connect = crate::client::connect_packet(V5, client_id, true);
        connect.username = Some(crate::client::s("alice"));
        connect.password = Some(bytes::Bytes::copy_from_slice(password.as_bytes()));
        connect
    };
    let login = |password: &str| {
        RawClient::connect(broker.addr(), alice("alice-2", password))
            .1
            .reason_code
    };
    let mut stays = RawClient::connected(broker.addr(), alice("alice-1", "old-password"));
    stays.subscribe("t", QoS::AtLeastOnce);

    crate::passwords::passwd_file(&passwd, "alice", "new-password");
    std::fs::write(&file, format!("{auth}[limits]\nmax_publish_rate = 5\n")).unwrap();
    let (status, report) = call(&broker, "POST", "/api/v1/reload", "");
    assert_eq!(status, 200, "{report}");
    assert!(
        report["applied"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k == "limits.max_publish_rate"),
        "{report}"
    );
    assert_eq!(login("old-password"), ReasonCode::BadUserNameOrPassword);
    assert_eq!(login("new-password"), ReasonCode::Success);
    stays.publish_simple("t", b"still here", QoS::AtLeastOnce);
    assert_eq!(stays.expect_publish_acked().payload(), b"still here");
    assert_eq!(get(&broker, "/api/v1/clients/alice-1")["connected"], true);
}

/// Publishes `count` QoS 1 messages on `topic`, up to `window` unacknowledged at a time (so a
/// stored broker commits them in groups rather than one sync per message).
pub(crate) fn publish_acked_in_windows(
    publisher: &mut RawClient,
    topic: &str,
    count: u16,
    window: u16,
) {
    let mut sent = 0;
    while sent < count {
        let ids: Vec<u16> = (0..window.min(count - sent))
            .map(|_| publisher.next_packet_id())
            .collect();
        for &id in &ids {
            let publish = publish_packet(topic, &sent.to_be_bytes(), QoS::AtLeastOnce, Some(id));
            publisher.send(&Packet::Publish(publish));
        }
        for &id in &ids {
            let reason = publisher.recv_where("PUBACK", |p| match p {
                Packet::PubAck(ack) if ack.packet_id == pid(id) => Some(ack.reason_code),
                _ => None,
            });
            assert_eq!(reason, ReasonCode::Success, "PUBACK {id}");
        }
        sent += ids.len() as u16;
    }
}

/// `GET /api/v1/clients/{client_id}` over the operations listener, polled until its `queued`
/// is `queued` or 5 s have passed; then its (`queued`, `queued_on_disk`) must be these.
fn assert_queued(broker: &TestBroker, client_id: &str, queued: u64, on_disk: u64, when: &str) {
    let path = format!("/api/v1/clients/{client_id}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let client = loop {
        let answer = crate::ops::get(broker.http_addr(), &path, "");
        assert_eq!(answer.status, 200, "{}", answer.body);
        let client: Value = serde_json::from_str(&answer.body).unwrap();
        if client["queued"] == queued || std::time::Instant::now() >= deadline {
            break client;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!(
        queue_counts(&client),
        (&json!(queued), &json!(on_disk)),
        "{when}: {client}"
    );
}

/// (`queued`, `queued_on_disk`) of a client's answer.
fn queue_counts(client: &Value) -> (&Value, &Value) {
    (&client["queued"], &client["queued_on_disk"])
}

/// A stored offline session keeps at most `persistence.memory_queue_messages` queued copies in
/// memory and the rest on disk: the API counts both (issue 47, defect 11), while the broker
/// runs and after a restart, and the count falls to 0 once the client has taken them all.
#[test]
fn queued_counts_the_messages_a_stored_session_keeps_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}{}memory_queue_messages = 10\n[queues]\nmax_queued_messages = 2000\n",
        crate::ops::HTTP,
        crate::persistence::store_config("redb", dir.path())
    );
    let broker = TestBroker::with_store(&config);
    let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "offline", 3600));
    sub.subscribe("spill/#", QoS::AtLeastOnce);
    sub.disconnect();
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "publisher");
    publish_acked_in_windows(&mut publisher, "spill/a", 1000, 50);
    publisher.disconnect();
    assert_queued(&broker, "offline", 1000, 990, "offline");
    let list = crate::ops::get(broker.http_addr(), "/api/v1/clients", "");
    let list: Value = serde_json::from_str(&list.body).unwrap();
    let listed = list["clients"].as_array().unwrap();
    let offline = listed.iter().find(|c| c["client_id"] == "offline").unwrap();
    assert_eq!(
        queue_counts(offline),
        (&json!(1000), &json!(990)),
        "{offline}"
    );
    drop(broker);

    let broker = TestBroker::with_store(&config);
    assert_queued(&broker, "offline", 1000, 990, "after a restart");
    let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "offline", 3600));
    for _ in 0..1000 {
        sub.expect_publish_acked();
    }
    sub.ping();
    assert_queued(&broker, "offline", 0, 0, "all taken");
}

#[test]
fn clients_are_searched_by_client_id_username_or_address() {
    let broker = TestBroker::with_config("[runtime]\nshards = 2\n");
    let pump = RawClient::connected_as(broker.addr(), V5, "plant-7-pump", "maintenance");
    let _b = RawClient::connected_clean(broker.addr(), V5, "plant-8-valve");
    let _c = RawClient::connected_as(broker.addr(), V311, "office-printer", "facilities");
    let found = get(&broker, "/api/v1/clients?search=plant-");
    assert_eq!(ids(&found["clients"]), ["plant-7-pump", "plant-8-valve"]);
    let found = get(&broker, "/api/v1/clients?search=valve&limit=1");
    assert_eq!(ids(&found["clients"]), ["plant-8-valve"]);
    let address = found["clients"][0]["address"].as_str().unwrap().to_owned();
    let by_address = get(&broker, &format!("/api/v1/clients?search={address}"));
    assert_eq!(ids(&by_address["clients"]), ["plant-8-valve"]);
    let everyone = get(&broker, "/api/v1/clients?search=");
    assert_eq!(
        everyone["clients"].as_array().unwrap().len(),
        3,
        "empty: no filter"
    );
    let nobody = get(&broker, "/api/v1/clients?search=nothing-like-it");
    assert_eq!(ids(&nobody["clients"]), Vec::<&str>::new());
    let by_user = get(&broker, "/api/v1/clients?search=facilit");
    assert_eq!(ids(&by_user["clients"]), ["office-printer"]);
    assert_eq!(by_user["clients"][0]["username"], "facilities");
    let anonymous = get(&broker, "/api/v1/clients?search=plant-8");
    assert_eq!(anonymous["clients"][0]["username"], Value::Null);
    // The owner outlives the connection: an offline session is still found by its user.
    drop(pump);
    let mut offline = persistent_connect(V5, "meter-3", 3600);
    offline.username = Some(codec::MqttStr::try_from("metering").unwrap());
    RawClient::connected(broker.addr(), offline).disconnect();
    let by_user = get(&broker, "/api/v1/clients?search=meter");
    assert_eq!(ids(&by_user["clients"]), ["meter-3"]);
    assert_eq!(by_user["clients"][0]["username"], "metering");
    assert_eq!(by_user["clients"][0]["connected"], false);
}
