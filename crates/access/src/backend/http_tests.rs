//! The HTTP backend against an HTTP/1.1 server run by the test (keep-alive, chosen status,
//! optional delay, every request recorded).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{HttpBackend, HttpSettings};
use crate::backend::{
    AclAnswer, AclRequest, Backend, BackendError, Grant, LoginAnswer, LoginRequest, SetupError,
    TopicAccess,
};

/// One request the server got.
#[derive(Debug, Clone)]
struct Recorded {
    path: String,
    body: Value,
}

#[derive(Default)]
struct ServerState {
    requests: Mutex<Vec<Recorded>>,
    status: AtomicU16,
    delay_ms: AtomicU64,
    connections: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    stop: AtomicBool,
}

/// An HTTP/1.1 server on a loopback port, one thread per connection; stopped on drop.
struct TestServer {
    addr: SocketAddr,
    state: Arc<ServerState>,
}

impl TestServer {
    fn start(status: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("local address");
        let state = Arc::new(ServerState::default());
        state.status.store(status, Ordering::SeqCst);
        let accepting = Arc::clone(&state);
        thread::spawn(move || {
            for stream in listener.incoming() {
                if accepting.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                accepting.connections.fetch_add(1, Ordering::SeqCst);
                let state = Arc::clone(&accepting);
                thread::spawn(move || serve(stream, &state));
            }
        });
        Self { addr, state }
    }

    fn delay(&self, delay: Duration) {
        let millis = u64::try_from(delay.as_millis()).expect("a short delay");
        self.state.delay_ms.store(millis, Ordering::SeqCst);
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().expect("requests").clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Answers the requests of one connection until the client closes it.
fn serve(stream: TcpStream, state: &ServerState) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        state.requests.lock().expect("requests").push(request);
        thread::sleep(Duration::from_millis(state.delay_ms.load(Ordering::SeqCst)));
        state.in_flight.fetch_sub(1, Ordering::SeqCst);
        let status = state.status.load(Ordering::SeqCst);
        let answer = format!("HTTP/1.1 {status} Whatever\r\nContent-Length: 2\r\n\r\nok");
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// Reads one request (request line, headers, a `Content-Length` body); `None` at the end.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Recorded> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|read| *read > 0)?;
    let path = line.split(' ').nth(1)?.to_owned();
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader
            .read_line(&mut header)
            .ok()
            .filter(|read| *read > 0)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(Recorded { path, body })
}

fn settings(server: &TestServer) -> HttpSettings {
    HttpSettings {
        login_url: server.url("/login"),
        acl_url: Some(server.url("/acl")),
        timeout: Duration::from_secs(5),
        max_concurrent: 4,
        exchange: None,
    }
}

fn backend(settings: HttpSettings) -> HttpBackend {
    HttpBackend::new(settings).expect("valid settings")
}

fn peer() -> SocketAddr {
    "192.0.2.7:50123".parse().expect("an address")
}

fn login_request(password: &[u8]) -> LoginRequest {
    LoginRequest {
        client_id: "sensor-1".to_owned(),
        username: Some("alice".to_owned()),
        password: Some(password.to_vec()),
        peer: peer(),
    }
}

fn acl_request(access: TopicAccess) -> AclRequest {
    AclRequest {
        client_id: "sensor-1".to_owned(),
        username: Some("alice".to_owned()),
        peer: peer(),
        topic: "plant/1/temperature".to_owned(),
        access,
    }
}

#[test]
fn a_login_posts_go_auth_json_and_2xx_allows() {
    let server = TestServer::start(200);
    let backend = backend(settings(&server));
    let answer = backend.login(&login_request(b"s3cret")).expect("an answer");
    assert_eq!(answer, LoginAnswer::Allow(Grant::default()));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/login");
    assert_eq!(
        requests[0].body,
        json!({
            "clientid": "sensor-1",
            "username": "alice",
            "password": "s3cret",
            "peer": "192.0.2.7:50123",
        })
    );
}

#[test]
fn a_password_that_is_not_utf8_goes_as_base64() {
    let server = TestServer::start(204);
    let backend = backend(settings(&server));
    let answer = backend.login(&login_request(&[0xff, 0x00, 0x41]));
    assert!(matches!(answer, Ok(LoginAnswer::Allow(_))), "{answer:?}");
    let body = &server.requests()[0].body;
    assert_eq!(body["password_base64"], json!("/wBB"));
    assert!(body.get("password").is_none(), "{body}");
}

#[test]
fn a_status_other_than_2xx_denies() {
    for status in [403, 500, 302, 401] {
        let server = TestServer::start(status);
        let backend = backend(settings(&server));
        let login = backend.login(&login_request(b"pw")).expect("an answer");
        assert_eq!(login, LoginAnswer::Deny, "status {status}");
        let acl = backend.check_acl(&acl_request(TopicAccess::Publish));
        assert_eq!(acl.expect("an answer"), AclAnswer::Deny, "status {status}");
    }
}

#[test]
fn a_topic_check_posts_the_access_code() {
    let server = TestServer::start(200);
    let backend = backend(settings(&server));
    let cases = [
        (TopicAccess::Receive, 1),
        (TopicAccess::Publish, 2),
        (TopicAccess::Subscribe, 4),
    ];
    for (access, _) in cases {
        let answer = backend.check_acl(&acl_request(access)).expect("an answer");
        assert_eq!(answer, AclAnswer::Allow);
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for (request, (_, acc)) in requests.iter().zip(cases) {
        assert_eq!(request.path, "/acl");
        assert_eq!(
            request.body,
            json!({
                "clientid": "sensor-1",
                "username": "alice",
                "peer": "192.0.2.7:50123",
                "topic": "plant/1/temperature",
                "acc": acc,
            })
        );
    }
}

#[test]
fn without_an_acl_url_a_topic_check_has_no_opinion() {
    let server = TestServer::start(200);
    let backend = backend(HttpSettings {
        acl_url: None,
        ..settings(&server)
    });
    let answer = backend.check_acl(&acl_request(TopicAccess::Subscribe));
    assert_eq!(answer.expect("an answer"), AclAnswer::Unknown);
    assert!(server.requests().is_empty());
}

#[test]
fn a_slow_server_times_out_within_about_the_timeout() {
    let server = TestServer::start(200);
    server.delay(Duration::from_secs(4));
    let backend = backend(HttpSettings {
        timeout: Duration::from_millis(300),
        ..settings(&server)
    });
    let started = Instant::now();
    let answer = backend.login(&login_request(b"pw"));
    let took = started.elapsed();
    assert!(
        matches!(
            answer,
            Err(BackendError::Timeout {
                backend: "http",
                timeout_ms: 300
            })
        ),
        "{answer:?}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn an_unreachable_server_is_unavailable() {
    let port = crate::test_ports::free_port();
    let backend = backend(HttpSettings {
        login_url: format!("http://127.0.0.1:{port}/login"),
        acl_url: None,
        timeout: Duration::from_secs(2),
        max_concurrent: 1,
        exchange: None,
    });
    match backend.login(&login_request(b"pw")) {
        Err(BackendError::Unavailable { backend, detail }) => {
            assert_eq!(backend, "http");
            assert!(detail.contains(&port.to_string()), "{detail}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

/// Credentials in the URL's userinfo stay out of the errors (they reach the log).
#[test]
fn errors_show_the_urls_without_their_credentials() {
    let port = crate::test_ports::free_port();
    let backend = backend(HttpSettings {
        login_url: format!("http://broker:pa@ss-hunter2@127.0.0.1:{port}/login"),
        acl_url: None,
        timeout: Duration::from_secs(2),
        max_concurrent: 1,
        exchange: None,
    });
    match backend.login(&login_request(b"pw")) {
        Err(BackendError::Unavailable { detail, .. }) => {
            assert!(!detail.contains("hunter2"), "{detail}");
            assert!(
                detail.contains(&format!("broker:<redacted>@127.0.0.1:{port}/login")),
                "{detail}"
            );
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    for url in ["ftp://tok3n@host/login", "http://u:hunter2@[bad-host/login"] {
        match HttpBackend::new(HttpSettings {
            login_url: url.to_owned(),
            acl_url: None,
            timeout: Duration::from_secs(1),
            max_concurrent: 1,
            exchange: None,
        }) {
            Err(error @ SetupError::InvalidUrl { .. }) => {
                let shown = error.to_string();
                assert!(
                    !shown.contains("hunter2") && !shown.contains("tok3n"),
                    "{shown}"
                );
            }
            other => panic!("{url}: expected InvalidUrl, got {other:?}"),
        }
    }
}

#[test]
fn connections_are_reused() {
    let server = TestServer::start(200);
    let backend = backend(settings(&server));
    for _ in 0..3 {
        assert!(matches!(
            backend.login(&login_request(b"pw")),
            Ok(LoginAnswer::Allow(_))
        ));
        assert_eq!(
            backend.check_acl(&acl_request(TopicAccess::Publish)).ok(),
            Some(AclAnswer::Allow)
        );
    }
    assert_eq!(server.requests().len(), 6);
    assert_eq!(server.state.connections.load(Ordering::SeqCst), 1);
}

/// Runs `count` logins at once; their answers.
fn concurrent_logins(
    backend: &HttpBackend,
    count: usize,
) -> Vec<Result<LoginAnswer, BackendError>> {
    thread::scope(|scope| {
        let handles: Vec<_> = (0..count)
            .map(|_| scope.spawn(|| backend.login(&login_request(b"pw"))))
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("login thread"))
            .collect()
    })
}

#[test]
fn max_concurrent_bounds_requests_in_flight() {
    let server = TestServer::start(200);
    server.delay(Duration::from_millis(200));
    let backend = backend(HttpSettings {
        max_concurrent: 2,
        ..settings(&server)
    });
    let answers = concurrent_logins(&backend, 6);
    assert!(
        answers
            .iter()
            .all(|answer| matches!(answer, Ok(LoginAnswer::Allow(_)))),
        "{answers:?}"
    );
    assert_eq!(server.requests().len(), 6);
    let max = server.state.max_in_flight.load(Ordering::SeqCst);
    assert!((1..=2).contains(&max), "{max} requests in flight at once");
}

#[test]
fn waiting_for_a_slot_counts_against_the_timeout() {
    let server = TestServer::start(200);
    server.delay(Duration::from_millis(1000));
    let backend = backend(HttpSettings {
        timeout: Duration::from_millis(1500),
        max_concurrent: 1,
        ..settings(&server)
    });
    let answers = concurrent_logins(&backend, 2);
    let allowed = answers
        .iter()
        .filter(|answer| matches!(answer, Ok(LoginAnswer::Allow(_))))
        .count();
    let timed_out = answers
        .iter()
        .filter(|answer| matches!(answer, Err(BackendError::Timeout { .. })))
        .count();
    assert_eq!((allowed, timed_out), (1, 1), "{answers:?}");
}

#[test]
fn settings_that_cannot_work_are_refused() {
    let good = HttpSettings {
        login_url: "http://127.0.0.1:8080/login".to_owned(),
        acl_url: None,
        timeout: Duration::from_secs(1),
        max_concurrent: 1,
        exchange: None,
    };
    assert!(HttpBackend::new(good.clone()).is_ok());
    for url in ["ftp://host/login", "not a url", "/relative/path"] {
        let error = HttpBackend::new(HttpSettings {
            login_url: url.to_owned(),
            ..good.clone()
        });
        assert!(
            matches!(error, Err(SetupError::InvalidUrl { .. })),
            "{url}: {error:?}"
        );
    }
    let bad_acl = HttpBackend::new(HttpSettings {
        acl_url: Some("mqtt://host".to_owned()),
        ..good.clone()
    });
    assert!(matches!(bad_acl, Err(SetupError::InvalidUrl { .. })));
    let zero = HttpBackend::new(HttpSettings {
        timeout: Duration::ZERO,
        ..good
    });
    assert!(matches!(zero, Err(SetupError::InvalidSetting { .. })));
}
