use std::io::{BufReader, Cursor};

use super::*;

const LIMITS: Limits = Limits {
    max_head: 256,
    max_body: 16,
};

fn read(bytes: &[u8]) -> Result<Option<Request>, HttpError> {
    read_request(&mut Cursor::new(bytes.to_vec()), LIMITS, || {})
}

fn status(bytes: &[u8]) -> Option<u16> {
    read(bytes).expect_err("the request is refused").status()
}

#[test]
fn reads_a_request_with_its_headers_and_body() {
    let request = read(b"POST /api/x?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc")
        .expect("parses")
        .expect("a request");
    assert_eq!(request.method, "POST");
    assert_eq!(request.target, "/api/x?a=1");
    assert_eq!(request.header("host"), Some("h"));
    assert_eq!(request.body, b"abc");
    assert!(!request.close, "HTTP/1.1 keeps the connection by default");
}

#[test]
fn pipelined_requests_come_one_at_a_time() {
    let bytes = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    // A reader whose buffer is smaller than one request: the head spans several fills.
    let mut reader = BufReader::with_capacity(5, Cursor::new(bytes.to_vec()));
    let first = read_request(&mut reader, LIMITS, || {})
        .expect("parses")
        .expect("a");
    let second = read_request(&mut reader, LIMITS, || {})
        .expect("parses")
        .expect("b");
    assert_eq!((first.target.as_str(), first.close), ("/a", false));
    assert_eq!((second.target.as_str(), second.close), ("/b", true));
    assert!(
        read_request(&mut reader, LIMITS, || {})
            .expect("clean end")
            .is_none()
    );
}

#[test]
fn http_1_0_closes_unless_asked_to_keep_alive() {
    let request = read(b"GET / HTTP/1.0\r\n\r\n")
        .expect("parses")
        .expect("one");
    assert!(request.close);
    let request = read(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
        .expect("parses")
        .expect("one");
    assert!(!request.close);
}

#[test]
fn malformed_requests_are_400() {
    for bad in [
        &b"GET\r\n\r\n"[..],
        b"GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET http://x/ HTTP/1.1\r\nHost: h\r\n\r\n",
        b"G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nNo colon\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost : h\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: \xff\r\n\r\n",
        b"GET / FTP/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nab",
        b"GET / HTTP/1.1\r\nHost: h\r\n",
    ] {
        assert_eq!(status(bad), Some(400), "{:?}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn limits_and_unsupported_features_have_their_statuses() {
    let long = format!("GET /{} HTTP/1.1\r\nHost: h\r\n\r\n", "a".repeat(300));
    assert_eq!(status(long.as_bytes()), Some(431));
    let endless = format!("GET / HTTP/1.1\r\nHost: h\r\nX: {}", "a".repeat(300));
    assert_eq!(status(endless.as_bytes()), Some(431));
    assert_eq!(
        status(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 17\r\n\r\n"),
        Some(413)
    );
    assert_eq!(
        status(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
        Some(413)
    );
    assert_eq!(
        status(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Some(501)
    );
    assert_eq!(status(b"GET / HTTP/2.0\r\nHost: h\r\n\r\n"), Some(505));
}

#[test]
fn a_closed_connection_is_no_request() {
    assert!(read(b"").expect("clean end").is_none());
}

#[test]
fn bare_lf_ends_lines_too() {
    let request = read(b"POST /api/x HTTP/1.1\nHost: h\nContent-Length: 2\n\nab")
        .expect("parses")
        .expect("a request");
    assert_eq!(
        (request.method.as_str(), request.target.as_str()),
        ("POST", "/api/x")
    );
    assert_eq!(request.header("host"), Some("h"));
    assert_eq!(request.body, b"ab");
    // Mixed, with empty lines before the request line, and split over many small fills.
    let bytes = b"\r\n\nGET /a HTTP/1.1\r\nHost: h\n\r\nGET /b HTTP/1.1\nHost: h\r\n\n";
    let mut reader = BufReader::with_capacity(1, Cursor::new(bytes.to_vec()));
    let first = read_request(&mut reader, LIMITS, || {})
        .expect("parses")
        .expect("a");
    let second = read_request(&mut reader, LIMITS, || {})
        .expect("parses")
        .expect("b");
    assert_eq!(
        (first.target.as_str(), second.target.as_str()),
        ("/a", "/b")
    );
    assert!(
        read_request(&mut reader, LIMITS, || {})
            .expect("clean end")
            .is_none()
    );
    // A bare CR is no line end.
    assert_eq!(status(b"GET / HTTP/1.1\nHost: h\rX: y\n\n"), Some(400));
    assert_eq!(status(b"GET / HTTP/1.1\nHost: h\nHost: i\n\n"), Some(400));
}

/// A reader that gives `bytes`, then times out like a socket.
struct ThenTimeout(Cursor<Vec<u8>>);

impl std::io::Read for ThenTimeout {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match std::io::Read::read(&mut self.0, buf)? {
            0 => Err(std::io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }
}

#[test]
fn a_request_cut_short_by_a_timeout_is_408_and_an_idle_one_is_not_answered() {
    let read = |bytes: &[u8]| {
        let mut reader = BufReader::new(ThenTimeout(Cursor::new(bytes.to_vec())));
        read_request(&mut reader, LIMITS, || {}).expect_err("times out")
    };
    assert_eq!(read(b"GET / HTTP/1.1\r\nHo").status(), Some(408));
    assert_eq!(
        read(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\nab").status(),
        Some(408)
    );
    assert_eq!(
        read(b"").status(),
        None,
        "nothing of a request: closed quietly"
    );
}

#[test]
fn head_read_is_called_between_the_head_and_the_body() {
    let mut called = false;
    let request = read_request(
        &mut Cursor::new(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n".to_vec()),
        LIMITS,
        || called = true,
    );
    assert!(request.expect("parses").is_some());
    assert!(called);
}
