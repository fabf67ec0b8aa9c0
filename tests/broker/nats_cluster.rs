//! A real 3-server NATS cluster for the tests (Debian's `nats-server`, installed by the test
//! command): each server on free loopback ports (client, cluster route, monitoring), routes
//! to the other two, JetStream on (its store in the cluster's temporary directory), killed on
//! drop. Ready once every server reports its two routes and a JetStream meta leader.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::ports::free_port;

/// One server's ports.
#[derive(Debug, Clone, Copy)]
struct Ports {
    client: u16,
    route: u16,
    monitor: u16,
}

/// Three clustered NATS servers.
pub struct NatsCluster {
    children: Vec<Child>,
    ports: Vec<Ports>,
    _dir: tempfile::TempDir,
    /// One NATS cluster at a time: three JetStream servers per test, started side by side in
    /// every cluster test, would starve each other on a small CI machine.
    _turn: MutexGuard<'static, ()>,
    /// The client URLs' scheme: `nats`, or `tls` for [`NatsCluster::start_tls`].
    scheme: &'static str,
}

/// Whose turn it is to run a NATS cluster.
static TURN: Mutex<()> = Mutex::new(());

/// The server binary: Debian installs it in /usr/sbin, which may not be on PATH.
fn binary() -> &'static str {
    if Path::new("/usr/sbin/nats-server").exists() {
        "/usr/sbin/nats-server"
    } else {
        "nats-server"
    }
}

/// A plain HTTP GET on loopback; the body, or `None` while the server is not up.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}

impl NatsCluster {
    /// Starts three servers and waits until each has routes to the other two and knows its
    /// JetStream leader. A port picked free may be taken by another test before its server
    /// binds it: an attempt whose servers do not form their routes (one exited, or
    /// [`ROUTES_WAIT`] passed) is stopped and made again on fresh ports.
    pub fn start() -> Self {
        // A test that failed while holding the turn poisons it; the next one still runs.
        let turn = TURN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let dir = tempfile::tempdir().unwrap();
            let ports: Vec<Ports> = (0..3).map(|_| Ports::fresh()).collect();
            let mut children: Vec<Child> = (0..3)
                .map(|index| spawn(dir.path(), index, &ports))
                .collect();
            if let Err(why) = routes_formed(&mut children, &ports) {
                for child in &mut children {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                failures.push(format!("{why}; server logs: {}", logs(dir.path())));
                continue;
            }
            let cluster = Self {
                children,
                ports,
                _dir: dir,
                _turn: turn,
                scheme: "nats",
            };
            cluster.wait_for_jetstream_leader();
            return cluster;
        }
        panic!("no NATS cluster in {START_ATTEMPTS} attempts: {failures:#?}");
    }

    fn wait_for_jetstream_leader(&self) {
        for ports in &self.ports {
            crate::harness::wait_until_within(
                SERVER_START_GUARD,
                "a NATS server that knows its JetStream leader",
                || {
                    let body = http_get(ports.monitor, "/jsz")?;
                    let jsz = serde_json::from_str::<serde_json::Value>(&body).ok()?;
                    let leader = jsz["meta_cluster"]["leader"].as_str()?;
                    (!leader.is_empty()).then_some(())
                },
            );
        }
    }

    /// One server with JetStream that speaks only TLS (its certificate `server`) and requires
    /// client certificates signed by the CA in `ca` (`verify: true`).
    pub fn start_tls(ca: &Path, server: (&Path, &Path)) -> Self {
        let turn = TURN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = tempfile::tempdir().unwrap();
        let ports = Ports {
            client: free_port(),
            route: 0,
            monitor: free_port(),
        };
        let config = format!(
            "server_name: tls0\nhost: 127.0.0.1\nport: {}\nhttp: \"127.0.0.1:{}\"\n\
             tls {{\n  cert_file: {:?}\n  key_file: {:?}\n  ca_file: {:?}\n  verify: true\n}}\n\
             jetstream {{\n  store_dir: {:?}\n  max_memory_store: 64MB\n  max_file_store: 256MB\n}}\n",
            ports.client,
            ports.monitor,
            server.0.display().to_string(),
            server.1.display().to_string(),
            ca.display().to_string(),
            dir.path().join("js").display().to_string(),
        );
        let path = dir.path().join("tls.conf");
        std::fs::write(&path, config).unwrap();
        let child = run_server(&path);
        crate::harness::wait_until_within(
            SERVER_START_GUARD,
            "the TLS NATS server healthy",
            || {
                http_get(ports.monitor, "/healthz")?
                    .contains("ok")
                    .then_some(())
            },
        );
        Self {
            children: vec![child],
            ports: vec![ports],
            _dir: dir,
            _turn: turn,
            scheme: "tls",
        }
    }

    /// A request to server `index` in NATS's text protocol (a JetStream API call, say): its
    /// reply's payload, or `None` without one within 5 s.
    pub fn request(&self, index: usize, subject: &str, body: &str) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.ports[index].client)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let inbox = "_INBOX.ringmq_test";
        let request = format!(
            "CONNECT {{\"verbose\":false,\"pedantic\":false}}\r\nSUB {inbox} 1\r\n\
             PUB {subject} {inbox} {}\r\n{body}\r\n",
            body.len()
        );
        stream.write_all(request.as_bytes()).ok()?;
        // INFO first, then (once the reply comes) `MSG <inbox> 1 <len>` and the payload.
        let mut read = String::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(at) = read.find("MSG ") {
                let (header, rest) = read[at..].split_once("\r\n")?;
                let len: usize = header.rsplit(' ').next()?.parse().ok()?;
                if rest.len() >= len {
                    return Some(rest[..len].to_owned());
                }
            }
            let n = stream.read(&mut chunk).ok().filter(|&n| n > 0)?;
            read.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    }

    /// The client URL of server `index`.
    pub fn url(&self, index: usize) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.ports[index].client)
    }

    /// Stops every server (NATS down for every node).
    pub fn stop_all(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops server `index` alone (the nodes connected to it lose NATS).
    pub fn stop(&mut self, index: usize) {
        let _ = self.children[index].kill();
        let _ = self.children[index].wait();
    }

    /// Freezes server `index` (SIGSTOP): its connections stay open, nothing is answered. Waits
    /// until every thread of it is stopped: `kill` returns once the signal is queued, and the
    /// group stop reaches the server's other threads only when the thread that takes the
    /// signal runs. On a loaded machine the server answered a request sent right after `kill`
    /// (a CI run: an owner record read through a server just frozen, so the claim asked the
    /// owner to release and was refused, not admitted unchecked).
    pub fn pause(&self, index: usize) {
        self.signal(index, "-STOP");
        let pid = self.children[index].id();
        crate::harness::wait_until_within(
            Duration::from_secs(10),
            "every thread of the NATS server stopped",
            || every_thread_stopped(pid).then_some(()),
        );
    }

    /// Lets server `index` run again after [`Self::pause`] (SIGCONT).
    pub fn resume(&self, index: usize) {
        self.signal(index, "-CONT");
    }

    fn signal(&self, index: usize, signal: &str) {
        let pid = self.children[index].id().to_string();
        let status = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Starts every server again after [`Self::stop_all`], on the same ports and store
    /// directories, and waits until the cluster is whole again.
    pub fn restart_all(&mut self) {
        for index in 0..self.ports.len() {
            self.spawn_again(index);
        }
        for index in 0..self.ports.len() {
            self.wait_for_routes(index);
        }
    }

    /// Starts server `index` again after [`Self::stop`] and waits until it has its routes.
    pub fn restart(&mut self, index: usize) {
        self.spawn_again(index);
        self.wait_for_routes(index);
    }

    fn spawn_again(&mut self, index: usize) {
        let path = self._dir.path().join(format!("s{index}.conf"));
        self.children[index] = run_server(&path);
    }

    fn wait_for_routes(&self, index: usize) {
        let port = self.ports[index].monitor;
        crate::harness::wait_until_within(
            SERVER_START_GUARD,
            "a restarted NATS server with its routes",
            || {
                let body = http_get(port, "/routez")?;
                let routes = serde_json::from_str::<serde_json::Value>(&body).ok()?;
                (routes["num_routes"].as_u64()? >= 2).then_some(())
            },
        );
    }

    /// Server `index`'s monitoring port.
    pub fn monitor_port(&self, index: usize) -> u16 {
        self.ports[index].monitor
    }
}

/// Attempts at starting the three servers, each on fresh ports.
const START_ATTEMPTS: usize = 3;
/// How long one attempt waits for its routes before it is made again on fresh ports (a hang
/// guard, not a timing assertion).
const ROUTES_WAIT: Duration = Duration::from_secs(20);

impl Ports {
    /// Three ports free when asked.
    fn fresh() -> Self {
        Self {
            client: free_port(),
            route: free_port(),
            monitor: free_port(),
        }
    }
}

/// Server `monitor`'s route count, `None` while it does not answer.
fn route_count(monitor: u16) -> Option<u64> {
    let body = http_get(monitor, "/routez")?;
    let routes = serde_json::from_str::<serde_json::Value>(&body).ok()?;
    routes["num_routes"].as_u64()
}

/// Waits until every server has routes to the other two; why not, if one exits first or
/// [`ROUTES_WAIT`] passes.
fn routes_formed(children: &mut [Child], ports: &[Ports]) -> Result<(), String> {
    let deadline = std::time::Instant::now() + ROUTES_WAIT;
    loop {
        for (index, child) in children.iter_mut().enumerate() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("server {index} exited ({status})"));
            }
        }
        if ports.iter().all(|p| route_count(p.monitor) >= Some(2)) {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err("the routes did not form".to_owned());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The end of every server log in `dir` (for a failed start).
fn logs(dir: &Path) -> String {
    (0..3)
        .map(|index| {
            let log =
                std::fs::read_to_string(dir.join(format!("s{index}.log"))).unwrap_or_default();
            let tail = &log[log.len().saturating_sub(600)..];
            format!("[s{index}] {tail}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A hang guard for a NATS server to start and find its routes and JetStream leader (three
/// servers starting beside other tests on a loaded 2-core CI machine took over 10 s), not a
/// timing assertion.
const SERVER_START_GUARD: std::time::Duration = std::time::Duration::from_secs(60);

/// Writes server `index`'s config and starts it. `no_advertise`: a node stays on the server it
/// was given (a test that stops one server cuts its nodes off instead of moving them).
fn spawn(dir: &Path, index: usize, ports: &[Ports]) -> Child {
    let me = ports[index];
    let routes: Vec<String> = ports
        .iter()
        .enumerate()
        .filter(|(other, _)| *other != index)
        .map(|(_, p)| format!("\"nats-route://127.0.0.1:{}\"", p.route))
        .collect();
    let config = format!(
        "server_name: s{index}\nhost: 127.0.0.1\nport: {}\nhttp: \"127.0.0.1:{}\"\n\
         cluster {{\n  name: ringmq-test\n  listen: \"127.0.0.1:{}\"\n  routes: [{}]\n  no_advertise: true\n}}\n\
         jetstream {{\n  store_dir: \"{}\"\n  max_memory_store: 64MB\n  max_file_store: 256MB\n}}\n",
        me.client,
        me.monitor,
        me.route,
        routes.join(", "),
        dir.join(format!("js{index}")).display()
    );
    let path = dir.join(format!("s{index}.conf"));
    std::fs::write(&path, config).unwrap();
    run_server(&path)
}

/// Starts a server with the config file at `path`.
/// Its log (appended across restarts) goes next to the config file, as `<name>.log`.
fn run_server(path: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path.with_extension("log"))
        .unwrap();
    Command::new(binary())
        .arg("-c")
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("nats-server runs (scripts/test.sh installs Debian's nats-server)")
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// Whether every thread of process `pid` is stopped (state `T` in `/proc/<pid>/task/*/stat`).
fn every_thread_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // The state follows the command name, which is in parentheses and may hold spaces.
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        matches!(state.and_then(|rest| rest.chars().next()), Some('T' | 't'))
    })
}
