//! The dashboard (`/` of the operations listener) in a real browser: headless Chromium driven
//! over the DevTools protocol (`cdp.rs`) against a broker with real clients. The page signs in
//! with the listener's bearer token; its overview shows what `/metrics` says; a client found
//! by the search and disconnected from the page gets its DISCONNECT; a retained message
//! deleted from the page is gone; a trace started from the page shows the traced client's
//! packets in the live view and downloads as a file. A screenshot of every page is written to
//! `dashboard-screenshots/` under the target directory.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use codec::{QoS, ReasonCode};
use serde_json::Value;

use crate::cdp::{Browser, POLL_GUARD, screenshot_dir};
use crate::client::{RawClient, V5, publish_packet};
use crate::harness::{TestBroker, wait_until_within};
use crate::ops::{Answer, exchange, get};

const TOKEN: &str = "dash-s3cret";

fn bearer() -> String {
    format!("Authorization: Bearer {TOKEN}\r\n")
}

/// Every sample of `/metrics` as `name` or `name{labels}` -> value, and each family's sum.
fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let answer = get(addr, "/metrics", &bearer());
    assert_eq!(answer.status, 200, "{}", answer.body);
    let mut out = BTreeMap::new();
    for line in answer.body.lines().filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let value: f64 = value.parse().unwrap();
        out.insert(key.to_owned(), value);
        let family = key.split('{').next().unwrap().to_owned();
        *out.entry(format!("sum:{family}")).or_default() += value;
    }
    out
}

/// The overview's cards: `data-metric` key -> the number shown.
fn cards(browser: &mut Browser) -> BTreeMap<String, f64> {
    let shown = browser.eval(
        "Object.fromEntries([...document.querySelectorAll('[data-metric]')]\
         .map(e => [e.dataset.metric, e.textContent]))",
    );
    let Value::Object(shown) = shown else {
        panic!("cards: {shown}")
    };
    shown
        .into_iter()
        .map(|(key, text)| {
            let number = text.as_str().unwrap().replace(',', "");
            (key, number.parse().unwrap_or(f64::NAN))
        })
        .collect()
}

fn expected(key: &str, metrics: &BTreeMap<String, f64>) -> Option<f64> {
    if key.contains('{') {
        metrics.get(key).copied()
    } else {
        metrics.get(&format!("sum:{key}")).copied()
    }
}

/// A `[[bridges]]` table sending `sensors/#` out to `address` under `edge1/`.
fn bridge(name: &str, address: SocketAddr) -> String {
    format!(
        "[[bridges]]\nname = \"{name}\"\naddress = \"{address}\"\nclient_id = \"bridge-{name}\"\n\
         protocol = \"5.0\"\nreconnect_min_ms = 100\nreconnect_max_ms = 1000\n\
         topics = [{{ pattern = \"sensors/#\", direction = \"out\", qos = 1, remote_prefix = \"edge1/\" }}]\n"
    )
}

fn shot(browser: &mut Browser, name: &str) {
    browser.screenshot(&screenshot_dir().join(format!("{name}.png")));
}

fn open(browser: &mut Browser, page: &str, ready: &str) {
    browser.eval(&format!("location.hash = '#{page}'"));
    browser.wait_for(ready, page);
}

fn click(browser: &mut Browser, selector: &str) {
    let clicked = browser.wait_for(
        &format!("(e => e && (e.click(), true))(document.querySelector('{selector}'))"),
        selector,
    );
    assert_eq!(clicked, Value::Bool(true));
}

fn fill(browser: &mut Browser, selector: &str, value: &str) {
    browser.eval(&format!(
        "document.querySelector('{selector}').value = {}",
        serde_json::to_string(value).unwrap()
    ));
}

fn text(browser: &mut Browser, selector: &str) -> String {
    let expression = format!("(document.querySelector('{selector}') || {{}}).textContent || ''");
    browser.eval(&expression).as_str().unwrap().to_owned()
}

#[test]
fn the_dashboard_shows_the_broker_and_acts_on_it() {
    // A bridge to another broker, and one to a port nobody listens on.
    let remote = TestBroker::start();
    let nowhere = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = format!(
        "[http]\nbind = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\nhistory_interval_ms = 200\n\
         [slow_subscribers]\nthreshold_ms = 5\n[limits]\nmax_inflight_outbound = 2\n\
         [queues]\nmax_queued_messages = 5\n{}{}",
        bridge("cloud", remote.addr()),
        bridge("backup", nowhere),
    );
    let broker = TestBroker::with_config(&config);
    wait_until_within(POLL_GUARD, "the bridge to the other broker up", || {
        let stats = broker.bridge_stats();
        stats
            .iter()
            .any(|b| b.name == "cloud" && b.connected)
            .then_some(())
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ringmq.toml");
    std::fs::write(&file, &config).unwrap();
    broker.set_config_source(file);
    let http = broker.http_addr();
    let mut sensors = RawClient::connected_as(broker.addr(), V5, "dash-sensors", "plant-ops");
    sensors.subscribe("sensors/+/temp", QoS::AtMostOnce);
    sensors.subscribe("$share/workers/jobs/#", QoS::AtLeastOnce);
    let mut worker = RawClient::connected_clean(broker.addr(), V5, "dash-worker");
    worker.subscribe("$share/workers/jobs/#", QoS::AtMostOnce);
    let mut kicked = RawClient::connected_clean(broker.addr(), V5, "dash-kick-me");
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "dash-publisher");
    for (topic, qos) in [
        ("dash/retained/a", QoS::AtLeastOnce),
        ("dash/retained/b", QoS::AtMostOnce),
    ] {
        let mut retained =
            publish_packet(topic, b"kept", qos, (qos != QoS::AtMostOnce).then_some(1));
        retained.retain = true;
        publisher.publish(retained);
    }
    publisher.ping();
    // A subscriber that acknowledges late, one that reads nothing (its window of 2 and queue
    // of 5 fill, the rest is dropped), some traffic and new connections for the charts.
    let mut late = RawClient::connected_clean(broker.addr(), V5, "dash-late");
    let mut sleeper = RawClient::connected_clean(broker.addr(), V5, "dash-sleeper");
    late.subscribe("sensors/#", QoS::AtLeastOnce);
    sleeper.subscribe("sensors/#", QoS::AtLeastOnce);
    let mut extra = Vec::new();
    for n in 0..30 {
        publisher.publish_simple(
            &format!("sensors/s{}/temp", n % 3),
            b"21.5",
            QoS::AtLeastOnce,
        );
        if n % 5 == 4 {
            late.drain_publishes(true);
        }
        if n % 10 == 9 {
            extra.push(RawClient::connected_clean(
                broker.addr(),
                V5,
                &format!("dash-extra-{n}"),
            ));
        }
        std::thread::sleep(Duration::from_millis(60));
    }
    publisher.ping();

    let mut browser = Browser::start(1280, 900);
    browser.download_to(dir.path());
    // Whatever the page's Content-Security-Policy blocks is noted, and must be nothing.
    browser.call(
        "Page.addScriptToEvaluateOnNewDocument",
        serde_json::json!({"source": "window.blocked = []; document.addEventListener(\
            'securitypolicyviolation', e => window.blocked.push(e.violatedDirective + ' ' + e.blockedURI));"}),
    );
    browser.navigate(&format!("http://127.0.0.1:{}/", http.port()));
    browser.wait_for("document.getElementById('login').open", "the token dialog");
    fill(&mut browser, "#token", TOKEN);
    browser.eval("document.getElementById('login-form').requestSubmit()");

    // Overview: the cards show what /metrics says (the broker is idle: nothing moves).
    browser.wait_for(
        "document.querySelector('#charts svg polyline, #charts svg circle')",
        "the charts",
    );
    let (shown, metrics) = wait_until_within(POLL_GUARD, "the overview matching /metrics", || {
        let shown = cards(&mut browser);
        let metrics = scrape(http);
        let same = shown
            .iter()
            .all(|(key, value)| expected(key, &metrics) == Some(*value));
        (same && shown.len() >= 9).then_some((shown, metrics))
    });
    assert!(shown["ringmq_sessions"] >= 9.0, "{shown:?}");
    assert!(shown["ringmq_listener_connections_open{listener=\"tcp\"}"] >= 9.0);
    assert!(shown["ringmq_messages_dropped_total"] > 0.0, "{shown:?}");
    assert_eq!(shown["ringmq_messages_received_total"], 32.0, "{shown:?}");
    assert_eq!(
        shown["ringmq_retained_messages"],
        metrics["sum:ringmq_retained_messages"]
    );
    shot(&mut browser, "overview");

    // Clients: the search finds the client (by id, then by username); the page disconnects
    // it with the chosen reason.
    open(
        &mut browser,
        "clients",
        "document.querySelector('#client-list table')",
    );
    fill(&mut browser, "#client-search", "kick");
    click(&mut browser, "#client-search-go");
    let found = browser.wait_for(
        "(rows => rows.length === 1 && rows[0].cells[0].textContent)(document.querySelectorAll('#client-list tbody tr'))",
        "the search's one row",
    );
    assert_eq!(found, "dash-kick-me");
    click(&mut browser, "#client-list tbody tr");
    browser.wait_for(
        "document.querySelector('#client-detail #kick')",
        "the client's detail",
    );
    fill(&mut browser, "#kick-reason", "0x98");
    click(&mut browser, "#kick");
    kicked.expect_disconnect(ReasonCode::AdministrativeAction);
    let result = browser.wait_for(
        "document.querySelector('#kick-result').textContent",
        "the kick's result",
    );
    assert!(
        result.as_str().unwrap().contains("dash-kick-me"),
        "{result}"
    );
    // By username: the session's owner, as the session directory records it.
    fill(&mut browser, "#client-search", "plant-o");
    click(&mut browser, "#client-search-go");
    browser.wait_for(
        "(rows => rows.length === 1 && rows[0].cells[0].textContent === 'dash-sensors' && rows[0].cells[1].textContent === 'plant-ops')(document.querySelectorAll('#client-list tbody tr'))",
        "the search by username's one row",
    );
    click(&mut browser, "#client-list tbody tr");
    browser.wait_for(
        "document.querySelector('#client-detail table')",
        "its subscriptions",
    );
    shot(&mut browser, "clients");

    // Topics: the tree counts subscribers and shows the shared group.
    open(
        &mut browser,
        "topics",
        "document.querySelector('#topic-tree ul')",
    );
    assert_eq!(
        text(&mut browser, "[data-filter=\"sensors/+/temp\"]"),
        "1 subscriber"
    );
    assert_eq!(
        text(&mut browser, "[data-group=\"workers/jobs/#\"]"),
        "shared workers: 2"
    );
    shot(&mut browser, "topics");

    // Retained: deleting one from the page clears it, the other stays.
    open(
        &mut browser,
        "retained",
        "document.querySelector('[data-topic=\"dash/retained/a\"]')",
    );
    shot(&mut browser, "retained");
    click(&mut browser, "[data-topic=\"dash/retained/a\"]");
    browser.wait_for(
        "!document.querySelector('[data-topic=\"dash/retained/a\"]') && document.querySelector('[data-topic=\"dash/retained/b\"]')",
        "the deleted row gone",
    );
    let retained = get(http, "/api/v1/retained", &bearer());
    assert!(
        !retained.body.contains("dash/retained/a"),
        "{}",
        retained.body
    );
    assert!(
        retained.body.contains("dash/retained/b"),
        "{}",
        retained.body
    );

    // Slow subscribers.
    open(
        &mut browser,
        "slow",
        "document.querySelector('#slow table')",
    );
    let slow = text(&mut browser, "#slow");
    assert!(
        slow.contains("dash-late") && slow.contains("dash-sleeper"),
        "{slow}"
    );
    shot(&mut browser, "slow-subscribers");

    // Traces: started from the page, the traced client's packets appear in the live view.
    open(
        &mut browser,
        "traces",
        "document.querySelector('#trace-form')",
    );
    fill(&mut browser, "#trace-kind", "client_id");
    fill(&mut browser, "#trace-value", "dash-traced");
    fill(&mut browser, "#trace-payload", "4");
    click(&mut browser, "#trace-start");
    browser.wait_for("document.querySelector('#trace-log')", "the live view");
    let mut traced = RawClient::connected_clean(broker.addr(), V5, "dash-traced");
    traced.subscribe("dash/traced/#", QoS::AtLeastOnce);
    traced.publish_simple("dash/traced/x", b"ping-payload", QoS::AtLeastOnce);
    let log = browser.wait_for(
        "(t => t.includes('PUBLISH') && t.includes('dash/traced/x') && t)(document.querySelector('#trace-log').textContent)",
        "the traced client's PUBLISH in the live view",
    );
    let log = log.as_str().unwrap().to_owned();
    assert!(log.contains("CONNECT"), "{log}");
    assert!(log.contains("SUBSCRIBE"), "{log}");
    browser.wait_for(
        "document.querySelector('[data-download]')",
        "the trace list",
    );
    shot(&mut browser, "traces");
    click(&mut browser, "[data-download]");
    let file = wait_until_within(POLL_GUARD, "the downloaded trace log", || {
        let entry = std::fs::read_dir(dir.path()).ok()?.flatten().find(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("ringmq-trace-") && name.ends_with(".log")
        })?;
        let text = std::fs::read_to_string(entry.path()).ok()?;
        text.contains("dash/traced/x").then_some(text)
    });
    assert!(file.contains("PUBLISH"), "{file}");

    // Cluster, bridges and the configuration, with its reload button.
    open(
        &mut browser,
        "system",
        "document.querySelector('#config-toml')",
    );
    assert!(text(&mut browser, "#cluster").contains("Not clustered"));
    let bridges = text(&mut browser, "#bridges");
    assert!(bridges.contains("cloudconnected"), "{bridges}");
    assert!(bridges.contains("backupdown"), "{bridges}");
    click(&mut browser, "#reload");
    browser.wait_for(
        "document.querySelector('#reload-result').textContent",
        "the reload's report",
    );
    let toml = browser.wait_for(
        "(t => t.includes('[http]') && t)(document.querySelector('#config-toml').textContent)",
        "the configuration after the reload",
    );
    let toml = toml.as_str().unwrap();
    assert!(
        toml.contains("<redacted>") && !toml.contains(TOKEN),
        "{toml}"
    );
    shot(&mut browser, "system");
    let blocked = browser.eval("window.blocked");
    assert_eq!(blocked, serde_json::json!([]), "blocked by the page's CSP");
}

/// On a node of a cluster (no credentials: a loopback listener), the cluster page shows the
/// link up and the live nodes.
#[test]
fn the_dashboard_shows_the_cluster() {
    let cluster = crate::cluster::start_cluster();
    let node = &cluster.nodes[0];
    wait_until_within(POLL_GUARD, "every node's heartbeat seen", || {
        let figures = node.cluster_figures()?;
        (figures.total_nodes == 3).then_some(())
    });
    let _clients: Vec<RawClient> = (0..3)
        .map(|n| cluster.client(n, V5, &format!("dash-node-{n}"), &["fleet/#"]))
        .collect();
    wait_until_within(POLL_GUARD, "every node's clients in the totals", || {
        let figures = node.cluster_figures()?;
        (figures.total_clients == 3).then_some(())
    });
    let listed = get(node.http_addr(), "/api/v1/cluster/nodes", "");
    assert_eq!(listed.status, 200, "{}", listed.body);
    let listed: Value = serde_json::from_str(&listed.body).unwrap();
    let rows = listed["nodes"].as_array().unwrap();
    let ids: Vec<&str> = rows
        .iter()
        .map(|n| n["node_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["n0", "n1", "n2"], "{listed}");
    for row in rows {
        assert_eq!(row["clients"], 1, "{row}");
        assert_eq!(row["this_node"], row["node_id"] == "n0", "{row}");
        assert_eq!(row["run"].as_str().unwrap().len(), 16, "{row}");
    }
    let mut browser = Browser::start(1280, 900);
    browser.navigate(&format!(
        "http://127.0.0.1:{}/#system",
        node.http_addr().port()
    ));
    let shown = browser.wait_for(
        "(t => t.includes('3 live nodes') && t)(document.querySelector('#cluster').textContent)",
        "the cluster's live nodes",
    );
    assert!(shown.as_str().unwrap().contains("NATS link up"), "{shown}");
    let nodes = browser
        .eval("[...document.querySelectorAll('#cluster-nodes tbody tr')].map(r => r.textContent)");
    let nodes: Vec<&str> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert!(nodes[0].starts_with("n0 this node"), "{nodes:?}");
    assert!(
        nodes[1].starts_with("n1") && nodes[2].starts_with("n2"),
        "{nodes:?}"
    );
    shot(&mut browser, "cluster");
}

/// With basic credentials the browser asks for them at the page and sends them again with the
/// page's own calls (here given in the address, as a user typing them in the prompt would).
#[test]
fn a_browser_with_basic_credentials_uses_the_dashboard() {
    let broker = TestBroker::with_config(
        "[http]\nbind = \"127.0.0.1:0\"\nusername = \"ops\"\npassword = \"pw\"\n",
    );
    let _client = RawClient::connected_clean(broker.addr(), V5, "dash-basic");
    let mut browser = Browser::start(1280, 900);
    let port = broker.http_addr().port();
    browser.navigate(&format!("http://ops:pw@127.0.0.1:{port}/#overview"));
    let sessions = browser.wait_for(
        "(e => e && e.textContent)(document.querySelector('[data-metric=\"ringmq_sessions\"]'))",
        "the overview read with the browser's basic credentials",
    );
    assert_eq!(sessions, "1");
    let opened = browser.eval("document.getElementById('login').open");
    assert_eq!(opened, Value::Bool(false), "no token asked for");
}

#[test]
fn dashboard_answers_carry_the_security_headers_and_forms_are_refused() {
    let broker = TestBroker::with_config(
        "[http]\nbind = \"127.0.0.1:0\"\nusername = \"ops\"\npassword = \"pw\"\n",
    );
    let http = broker.http_addr();
    let page = get(http, "/", "");
    assert_eq!(
        page.status, 401,
        "basic credentials configured: the page is behind them"
    );
    assert!(
        page.header("www-authenticate")
            .unwrap()
            .starts_with("Basic")
    );
    let basic = "Authorization: Basic b3BzOnB3\r\n";
    let page = get(http, "/", basic);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/dashboard/js/main.js"));
    let script = get(http, "/dashboard/js/main.js", basic);
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    for answer in [&page, &script, &get(http, "/api/v1/history", basic)] {
        assert_eq!(
            answer
                .header("content-security-policy")
                .map(|v| v.starts_with("default-src 'self'")),
            Some(true)
        );
        assert_eq!(answer.header("x-frame-options"), Some("DENY"));
        assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
        assert!(answer.header("access-control-allow-origin").is_none());
    }
    let history: Value = serde_json::from_str(&get(http, "/api/v1/history", basic).body).unwrap();
    assert_eq!(history["capacity"], 720);
    assert_eq!(history["interval_ms"], 5000);
    // A form with no field (an empty body, a form type) cannot reload or delete.
    let host = format!("Host: 127.0.0.1:{}\r\n", http.port());
    for (method, path) in [("POST", "/api/v1/reload"), ("DELETE", "/api/v1/retained/a")] {
        let form: Answer = exchange(
            http,
            format!(
                "{method} {path} HTTP/1.1\r\n{host}{basic}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        );
        assert_eq!(form.status, 415, "{method} {path}: {}", form.body);
    }
    let post = exchange(
        http,
        format!("POST / HTTP/1.1\r\n{host}{basic}Content-Length: 0\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(post.status, 405);
}
