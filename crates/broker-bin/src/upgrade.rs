//! Upgrades without downtime (docs/operations.md, "Upgrade without downtime"): on SIGUSR2 the
//! running broker starts the binary at its own path (a new version installed over it) with
//! the same arguments, hands it every MQTT listening socket over a Unix socket (`SCM_RIGHTS`,
//! `ring_runtime::send_listeners`), then drains as at any shutdown (5.0 clients get
//! DISCONNECT 0x8B, every session is committed, the store closed) and says so; the new
//! process, waiting meanwhile, opens the store and serves the same sockets. Connection
//! attempts in between wait in the sockets' accept queues: none is refused.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use ring_runtime::InheritedListeners;

/// Names the hand-over socket to the new process.
pub const UPGRADE_SOCKET_ENV: &str = "RINGMQ_UPGRADE_SOCKET";
/// The first line of the hand-over, and the old process's last word.
const HELLO: &[u8] = b"ringmq-upgrade 1\n";
const RELEASED: &str = "released";
/// The longest the old process waits for the new one to connect.
const CONNECT_WAIT: Duration = Duration::from_secs(30);

/// Why an upgrade did not happen (the running broker goes on serving).
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error("the hand-over socket {path}: {source}")]
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("starting {exe}: {source}")]
    Spawn {
        exe: PathBuf,
        source: std::io::Error,
    },
    #[error("the new process exited before taking the listeners ({0})")]
    SuccessorExited(std::process::ExitStatus),
    #[error("the new process did not connect within {0:?}")]
    SuccessorSilent(Duration),
    #[error("handing over the listeners: {0}")]
    Handover(std::io::Error),
}

/// The old process's side once the listeners are handed over: drain, then [`Self::released`].
#[derive(Debug)]
pub struct Handover {
    stream: UnixStream,
    path: PathBuf,
    /// The new process.
    pub successor: u32,
}

impl Handover {
    /// Tells the new process that the store is closed and this process is about to exit.
    pub fn released(mut self) {
        let _ = writeln!(self.stream, "{RELEASED}");
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Starts `exe` with `args` and hands it `listeners`. The caller drains next.
pub fn start_successor(
    exe: &Path,
    args: &[std::ffi::OsString],
    listeners: &[std::net::TcpListener],
) -> Result<Handover, UpgradeError> {
    let path = std::env::temp_dir().join(format!("ringmq-upgrade-{}.sock", std::process::id()));
    let socket_error = |source| UpgradeError::Socket {
        path: path.clone(),
        source,
    };
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).map_err(socket_error)?;
    listener.set_nonblocking(true).map_err(socket_error)?;
    let mut child = Command::new(exe)
        .args(args)
        .env(UPGRADE_SOCKET_ENV, &path)
        .spawn()
        .map_err(|source| UpgradeError::Spawn {
            exe: exe.to_owned(),
            source,
        })?;
    let stream = match accept_successor(&listener, &mut child) {
        Ok(stream) => stream,
        Err(error) => {
            let _ = (child.kill(), child.wait(), std::fs::remove_file(&path));
            return Err(error);
        }
    };
    let all: Vec<&std::net::TcpListener> = listeners.iter().collect();
    ring_runtime::send_listeners(&stream, &all, HELLO).map_err(UpgradeError::Handover)?;
    tracing::info!(
        pid = child.id(),
        listeners = all.len(),
        "upgrade: listeners handed to the new process; draining"
    );
    Ok(Handover {
        stream,
        path,
        successor: child.id(),
    })
}

/// The new process's connection, unless it exits or stays silent first.
fn accept_successor(
    listener: &UnixListener,
    child: &mut Child,
) -> Result<UnixStream, UpgradeError> {
    let deadline = Instant::now() + CONNECT_WAIT;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream
                    .set_nonblocking(false)
                    .map_err(UpgradeError::Handover)?;
                return Ok(stream);
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(UpgradeError::Handover(error)),
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(UpgradeError::SuccessorExited(status));
        }
        if Instant::now() >= deadline {
            return Err(UpgradeError::SuccessorSilent(CONNECT_WAIT));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The new process's side: takes the listeners from the process at `path`, then waits until it
/// has released the store (or died), and returns them for [`crate::Broker::start_inheriting`].
pub fn take_over(path: &Path) -> Result<InheritedListeners, UpgradeError> {
    let socket_error = |source| UpgradeError::Socket {
        path: path.to_owned(),
        source,
    };
    let stream = UnixStream::connect(path).map_err(socket_error)?;
    let (listeners, hello) =
        ring_runtime::receive_listeners(&stream).map_err(UpgradeError::Handover)?;
    if hello != HELLO {
        let text = String::from_utf8_lossy(&hello).into_owned();
        return Err(UpgradeError::Handover(std::io::Error::other(format!(
            "unexpected hand-over `{text}`"
        ))));
    }
    tracing::info!(
        listeners = listeners.len(),
        "upgrade: listeners taken over; waiting for the old process to release the store"
    );
    // A line or the end of the stream: the old process released everything, or died (its
    // locks went with it).
    let mut line = String::new();
    let _ = BufReader::new(&stream).read_line(&mut line);
    if line.trim() != RELEASED {
        tracing::warn!("upgrade: the old process ended without saying it released the store");
    }
    Ok(InheritedListeners::new(listeners))
}
