//! A real broker process (the `ringmq` binary) for tests that kill it with SIGKILL: on a free
//! loopback port, killed and reaped on drop.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `ringmq` binary.
pub struct BrokerProcess {
    child: Child,
    pub addr: SocketAddr,
}

impl BrokerProcess {
    /// Writes `config` (TOML) to `config_path` and starts the binary with it on a free port;
    /// returns once it accepts connections.
    pub fn start(config: &str, config_path: &Path) -> Self {
        let addr: SocketAddr = ([127, 0, 0, 1], crate::ports::free_port()).into();
        Self::start_on(addr, config, config_path)
    }

    /// [`Self::start`] on `addr` (a port an earlier broker of the test used, say). Its log
    /// goes to the test's stderr, or, with `RINGMQ_BROKER_LOGS=DIR`, is appended to
    /// `DIR/<config file stem>.log` (one file per node of the fault suite, say). Its log
    /// filter is the config's (the test's own `RUST_LOG` is not passed on), or
    /// `RINGMQ_BROKER_LOG_FILTER` when set (`info,cluster=debug`, say, to trace a fault run).
    pub fn start_on(addr: SocketAddr, config: &str, config_path: &Path) -> Self {
        std::fs::write(config_path, config).expect("write the config");
        let mut command = broker_command();
        command.env_remove("RUST_LOG");
        if let Some(filter) = std::env::var_os("RINGMQ_BROKER_LOG_FILTER") {
            command.env("RUST_LOG", filter);
        }
        let child = command
            .arg("--config")
            .arg(config_path)
            .arg("--listen")
            .arg(addr.to_string())
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(log_destination(config_path))
            .spawn()
            .expect("start the broker binary");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "the broker did not start listening"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, addr }
    }

    /// Waits (at most 20 s) until the broker answers a CONNECT with a CONNACK: after a restart
    /// on the port of a killed broker, a TCP connect may still reach the killed one's closing
    /// listener. Fails the test if the broker exits instead.
    pub fn wait_serving(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("the broker's status") {
                panic!("the broker exited instead of serving: {status}");
            }
            if answers_connect(self.addr) {
                return;
            }
            assert!(Instant::now() < deadline, "the broker did not serve");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The broker's process id (for its `/proc` entries).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A memory line of the broker's `/proc/PID/status` (`VmRSS`, `RssAnon`, ...) in bytes.
    pub fn memory(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the broker's /proc status");
        let line = status
            .lines()
            .find(|line| line.starts_with(field))
            .unwrap_or_else(|| panic!("{field} in the broker's /proc status"));
        let kb: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .expect("a number of kB");
        kb * 1024
    }

    /// SIGTERM (the broker commits its sessions and closes its store), then reap.
    pub fn stop(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "SIGTERM the broker");
        let exit = self.child.wait().expect("reap the broker");
        assert!(exit.success(), "the broker's exit after SIGTERM: {exit}");
    }

    /// SIGKILL, then reap.
    pub fn kill_9(mut self) {
        self.child.kill().expect("SIGKILL the broker");
        self.child.wait().expect("reap the broker");
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The broker's command: the `ringmq` binary built with the tests or, with
/// `RINGMQ_TEST_BROKER_CMD` set, that command (words split on spaces): the test command's
/// cross step runs the smoke tests (`smoke.rs`) with `qemu-aarch64-static <static aarch64
/// ringmq>`.
fn broker_command() -> Command {
    let custom = std::env::var("RINGMQ_TEST_BROKER_CMD").unwrap_or_default();
    let mut words = custom.split_whitespace();
    let Some(program) = words.next() else {
        return Command::new(env!("CARGO_BIN_EXE_ringmq"));
    };
    let mut command = Command::new(program);
    command.args(words);
    command
}

/// Whether a 3.1.1 CONNECT to `addr` gets a CONNACK (two bytes `0x20 0x02`, then flags and
/// return code) within a second.
fn answers_connect(addr: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    // CONNECT: "MQTT", level 4, clean session, keep-alive 0, client id "probe".
    let connect = b"\x10\x11\x00\x04MQTT\x04\x02\x00\x00\x00\x05probe";
    let mut connack = [0u8; 4];
    stream.write_all(connect).is_ok()
        && stream.read_exact(&mut connack).is_ok()
        && connack[..2] == [0x20, 0x02]
}

/// Where a broker started with `config_path` writes its log (see [`BrokerProcess::start_on`]).
fn log_destination(config_path: &Path) -> Stdio {
    let Some(dir) = std::env::var_os("RINGMQ_BROKER_LOGS") else {
        return Stdio::inherit();
    };
    let stem = config_path
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy();
    let path = Path::new(&dir).join(format!("{stem}.log"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    Stdio::from(file)
}
