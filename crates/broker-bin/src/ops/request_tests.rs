use std::io::{BufReader, Cursor};

use super::*;

const LIMITS: Limits = Limits {
    max_head: 256,
    max_body: 16,
};

fn read(bytes: &[u8]) -> Result<Option<Request>, HttpError> {
    read_request(&mut Cursor::new(bytes.to_vec()), LIMITS)
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
    let first = read_request(&mut reader, LIMITS)
        .expect("parses")
        .expect("a");
    let second = read_request(&mut reader, LIMITS)
        .expect("parses")
        .expect("b");
    assert_eq!((first.target.as_str(), first.close), ("/a", false));
    assert_eq!((second.target.as_str(), second.close), ("/b", true));
    assert!(
        read_request(&mut reader, LIMITS)
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
