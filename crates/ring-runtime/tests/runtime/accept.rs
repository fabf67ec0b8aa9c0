//! Accepting when file descriptors run out: the listener pauses for `accept_backoff` instead
//! of retrying every turn, and accepts again once descriptors are free.
//!
//! Runs in a child process (this test binary re-executed with [`CHILD_ENV`]) so lowering
//! `RLIMIT_NOFILE` and exhausting descriptors cannot disturb other tests. Nothing is timed:
//! the no-spin check counts refused accepts across mailbox round trips (each one a shard turn)
//! while a long pause is in force.

use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use ring_runtime::{ConnId, Handler, RuntimeHandle, ShardCtx, ShardId};

use crate::common;

const CHILD_ENV: &str = "RINGMQ_TEST_ACCEPT_CHILD";
const TEST_NAME: &str = "accept::accept_pauses_when_descriptors_run_out_and_recovers";
/// Soft `RLIMIT_NOFILE` in the child: small, so exhausting it is quick.
const FD_LIMIT: u64 = 256;
/// Shard turns (mailbox round trips) during which a paused listener must not retry.
const TURNS: usize = 50;

/// Reports accepts and mailbox batches.
struct Server {
    accepted: mpsc::Sender<()>,
    turns: mpsc::Sender<()>,
}

impl Handler for Server {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {
        self.accepted.send(()).unwrap();
    }

    fn on_data(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _data: bytes::Bytes) {}

    fn on_messages(&mut self, _ctx: &mut ShardCtx<()>, _messages: Vec<()>) {
        self.turns.send(()).unwrap();
    }
}

struct Started {
    handle: RuntimeHandle<()>,
    accepted: mpsc::Receiver<()>,
    turns: mpsc::Receiver<()>,
}

fn start(backoff: Duration) -> Option<Started> {
    let (accepted_tx, accepted) = mpsc::channel();
    let (turns_tx, turns) = mpsc::channel();
    let mut config = common::config(1);
    config.accept_backoff = backoff;
    let handle = common::start(config, move |_| Server {
        accepted: accepted_tx.clone(),
        turns: turns_tx.clone(),
    })?;
    Some(Started {
        handle,
        accepted,
        turns,
    })
}

/// Opens descriptors until the limit is reached, then frees one for the client's socket.
fn exhaust_descriptors() -> Vec<File> {
    let mut held = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(file) => held.push(file),
            Err(error) if error.raw_os_error() == Some(libc::EMFILE) => break,
            Err(error) => panic!("open /dev/null: {error}"),
        }
    }
    held.pop();
    held
}

/// Connects while no descriptor is left for the server's accept; waits for the refusal.
fn connect_refused(started: &Started) -> (Vec<File>, TcpStream) {
    let held = exhaust_descriptors();
    let client = TcpStream::connect(started.handle.local_addrs()[0]).unwrap();
    common::wait_until("a refused accept", || started.handle.accepts_refused() >= 1);
    (held, client)
}

/// A long pause: across many shard turns the listener is not retried.
fn paused_listener_is_not_retried() {
    let Some(started) = start(Duration::from_secs(60)) else {
        return;
    };
    let (held, _client) = connect_refused(&started);
    for _ in 0..TURNS {
        started.handle.post(ShardId::new(0), vec![()]).unwrap();
        started.turns.recv_timeout(common::HANG).unwrap();
    }
    assert_eq!(started.handle.accepts_refused(), 1, "one refusal per pause");
    assert!(started.accepted.try_recv().is_err());
    drop(held);
    started.handle.shutdown();
    started.handle.join().unwrap();
}

/// A short pause: once descriptors are free again the waiting connection is accepted.
fn accept_recovers_once_descriptors_are_free() {
    let Some(started) = start(Duration::from_millis(10)) else {
        return;
    };
    let (held, _client) = connect_refused(&started);
    drop(held);
    started.accepted.recv_timeout(common::HANG).unwrap();
    started.handle.shutdown();
    started.handle.join().unwrap();
}

fn lower_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(got, 0, "getrlimit");
    limit.rlim_cur = (FD_LIMIT as libc::rlim_t).min(limit.rlim_max);
    // SAFETY: `limit` is a valid rlimit with cur <= max.
    let set = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    assert_eq!(set, 0, "setrlimit");
}

/// This test binary run again, through `RINGMQ_TEST_RUNNER` when set (the cross step runs the
/// aarch64 binary under qemu-user, which cannot exec it directly).
fn child_command() -> Command {
    let exe = std::env::current_exe().unwrap();
    match std::env::var_os("RINGMQ_TEST_RUNNER") {
        Some(runner) => {
            let mut command = Command::new(runner);
            command.arg(exe);
            command
        }
        None => Command::new(exe),
    }
}

#[test]
fn accept_pauses_when_descriptors_run_out_and_recovers() {
    if std::env::var_os(CHILD_ENV).is_some() {
        lower_fd_limit();
        paused_listener_is_not_retried();
        accept_recovers_once_descriptors_are_free();
        println!("CHILD-DONE");
        return;
    }
    let output = child_command()
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if let Some(reason) = stderr.lines().find_map(|line| line.strip_prefix("SKIP: ")) {
        common::skip(&reason);
        return;
    }
    assert!(
        output.status.success() && stdout.contains("CHILD-DONE"),
        "child failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}
