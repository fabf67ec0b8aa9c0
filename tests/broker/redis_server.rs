//! A real `redis-server` for the tests (Debian's `redis-server`, installed by the test
//! command), on a free loopback port, killed on drop; commands sent in RESP.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running redis-server.
pub struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    pub fn start() -> Self {
        let port = crate::ports::free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server runs (scripts/test.sh installs Debian's redis-server)");
        let server = Self { child, port };
        crate::harness::wait_until("redis-server accepts connections", || {
            TcpStream::connect(("127.0.0.1", port)).ok().map(|_| ())
        });
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Runs one command; returns the first line of the reply.
    pub fn command(&self, args: &[&str]) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream.write_all(request.as_bytes()).unwrap();
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).unwrap();
        assert!(!line.starts_with('-'), "redis refused {args:?}: {line}");
        line
    }

    /// Stops the server (a backend that cannot be reached).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
