//! An HTTP authentication server run by the tests: answers each POST with the status a
//! closure picks from the path and JSON body, optionally after a delay, and counts requests.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// What the server answers: a status and how long to wait first.
pub struct Answer {
    pub status: u16,
    pub delay: Duration,
}

/// An answer with a body (the AUTH exchange's JSON).
struct Reply {
    answer: Answer,
    body: String,
}

type Decide = dyn Fn(&str, &serde_json::Value) -> Reply + Send + Sync;

/// A running server; stops accepting when dropped.
pub struct HttpAuthServer {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl HttpAuthServer {
    /// Serves on a free loopback port; `decide` gets the path and the parsed body.
    pub fn start(
        decide: impl Fn(&str, &serde_json::Value) -> Answer + Send + Sync + 'static,
    ) -> Self {
        Self::serve(Arc::new(move |path: &str, body: &serde_json::Value| {
            Reply {
                answer: decide(path, body),
                body: String::new(),
            }
        }))
    }

    /// Serves 200 with the JSON `decide` returns for the path and the parsed body.
    pub fn start_json(
        decide: impl Fn(&str, &serde_json::Value) -> serde_json::Value + Send + Sync + 'static,
    ) -> Self {
        Self::serve(Arc::new(move |path: &str, body: &serde_json::Value| {
            Reply {
                answer: Answer {
                    status: 200,
                    delay: Duration::ZERO,
                },
                body: decide(path, body).to_string(),
            }
        }))
    }

    fn serve(decide: Arc<Decide>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, stopped) = (Arc::clone(&requests), Arc::clone(&stop));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::Acquire) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (decide, count) = (Arc::clone(&decide), Arc::clone(&count));
                std::thread::spawn(move || serve(stream, &*decide, &count));
            }
        });
        Self {
            addr,
            requests,
            stop,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests answered or being answered so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Acquire)
    }
}

impl Drop for HttpAuthServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Serves the requests of one keep-alive connection.
fn serve(stream: TcpStream, decide: &Decide, count: &AtomicUsize) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_owned();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        count.fetch_add(1, Ordering::AcqRel);
        let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        let reply = decide(&path, &json);
        std::thread::sleep(reply.answer.delay);
        let response = format!(
            "HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n{}",
            reply.answer.status,
            reply.body.len(),
            reply.body
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
