//! Webhooks against a real HTTP server on loopback (a small one written here, answering with
//! the statuses a test gives it): batches arrive whole, failures are retried with backoff and
//! then given up, a full queue drops and counts, filters choose the topics.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use broker_api::{BrokerEvent, EventHook, EventKind};
use serde_json::Value;

use crate::{WebhookSettings, Webhooks};

/// An HTTP server answering each POST with the next of `statuses` (then 200), sending each
/// body it received to the returned channel.
fn server(statuses: Vec<u16>) -> (String, mpsc::Receiver<Value>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (bodies, received) = mpsc::channel();
    std::thread::spawn(move || {
        let mut statuses = statuses.into_iter();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            if serve(stream, &mut statuses, &bodies).is_err() {
                continue;
            }
        }
    });
    (url, received)
}

/// Serves the requests of one (keep-alive) connection.
fn serve(
    stream: TcpStream,
    statuses: &mut impl Iterator<Item = u16>,
    bodies: &mpsc::Sender<Value>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let lower = line.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let status = statuses.next().unwrap_or(200);
        if status == 200 {
            let _ = bodies.send(serde_json::from_slice(&body).unwrap_or(Value::Null));
        }
        write!(writer, "HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n")?;
    }
}

fn connected(client: &str) -> BrokerEvent {
    BrokerEvent::ClientConnected {
        client_id: client.into(),
        username: None,
        peer: None,
        protocol: 5,
        clean_start: true,
        keep_alive: 60,
    }
}

fn published(topic: &str) -> BrokerEvent {
    BrokerEvent::MessagePublished {
        client_id: "p".into(),
        topic: topic.into(),
        qos: 0,
        retain: false,
        payload: broker_api::Bytes::from_static(b"x"),
    }
}

fn quick(url: &str, events: Vec<EventKind>) -> WebhookSettings {
    let mut settings = WebhookSettings::new(url, events);
    settings.batch_wait = Duration::from_millis(50);
    settings.backoff = Duration::from_millis(10);
    settings.timeout = Duration::from_secs(2);
    settings
}

fn next(received: &mpsc::Receiver<Value>) -> Value {
    received
        .recv_timeout(Duration::from_secs(10))
        .expect("a POST within 10 s")
}

#[test]
fn events_arrive_in_batches_with_their_names() {
    let (url, received) = server(Vec::new());
    let hooks = Webhooks::start(vec![quick(&url, vec![EventKind::ClientConnected])]).unwrap();
    assert!(hooks.wants(EventKind::ClientConnected));
    assert!(!hooks.wants(EventKind::MessagePublished));
    for i in 0..5 {
        hooks.post(connected(&format!("c{i}")));
    }
    let mut names = Vec::new();
    while names.len() < 5 {
        let body = next(&received);
        for event in body["events"].as_array().unwrap() {
            assert_eq!(event["event"], "client.connected");
            names.push(event["clientid"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(names, ["c0", "c1", "c2", "c3", "c4"]);
    drop(hooks);
}

#[test]
fn a_failing_endpoint_is_retried_then_given_up_and_counted() {
    let (url, received) = server(vec![500, 503]);
    let hooks = Webhooks::start(vec![quick(&url, vec![EventKind::ClientConnected])]).unwrap();
    hooks.post(connected("a"));
    assert_eq!(next(&received)["events"][0]["clientid"], "a");
    wait_until(|| hooks.figures()[0].delivered == 1);
    assert_eq!(hooks.figures()[0].failed_requests, 2);

    let (url, _received) = server(vec![500; 100]);
    let mut settings = quick(&url, vec![EventKind::ClientConnected]);
    settings.max_attempts = 3;
    let hooks = Webhooks::start(vec![settings]).unwrap();
    hooks.post(connected("b"));
    wait_until(|| hooks.figures()[0].given_up == 1);
    assert_eq!(hooks.figures()[0].failed_requests, 3);
}

/// Waits (at most 10 s) until `done`.
fn wait_until(done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "not within 10 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_full_queue_drops_and_counts() {
    // An endpoint that never answers: the thread holds one batch, the queue fills.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", silent.local_addr().unwrap());
    let mut settings = quick(&url, vec![EventKind::ClientConnected]);
    settings.queue_capacity = 4;
    settings.batch_max = 1;
    settings.max_attempts = 1;
    let hooks = Webhooks::start(vec![settings]).unwrap();
    for i in 0..20 {
        hooks.post(connected(&format!("c{i}")));
    }
    let overflowed = hooks.figures()[0].overflowed;
    assert!((15..=16).contains(&overflowed), "{overflowed} overflowed");
}

#[test]
fn topic_filters_choose_the_published_messages() {
    let (url, received) = server(Vec::new());
    let mut settings = quick(&url, vec![EventKind::MessagePublished]);
    settings.topics = vec!["sensors/+/temp".into()];
    let hooks = Webhooks::start(vec![settings]).unwrap();
    assert!(hooks.wants_topic(b"sensors/1/temp"));
    assert!(!hooks.wants_topic(b"sensors/1/humidity"));
    hooks.post(published("sensors/1/humidity"));
    hooks.post(published("sensors/2/temp"));
    let body = next(&received);
    assert_eq!(body["events"].as_array().unwrap().len(), 1);
    assert_eq!(body["events"][0]["topic"], "sensors/2/temp");
}

#[test]
fn bad_settings_are_refused_naming_the_problem() {
    let refused = |settings| Webhooks::start(vec![settings]).err().unwrap().to_string();
    let ftp = refused(WebhookSettings::new(
        "ftp://x/",
        vec![EventKind::ClientConnected],
    ));
    assert!(ftp.contains("http://"), "{ftp}");
    let none = refused(WebhookSettings::new("http://x/", Vec::new()));
    assert!(none.contains("client.connected"), "{none}");
    let mut settings = WebhookSettings::new("http://x/", vec![EventKind::MessagePublished]);
    settings.topics = vec!["a/#/b".into()];
    assert!(refused(settings).contains("a/#/b"));
}
