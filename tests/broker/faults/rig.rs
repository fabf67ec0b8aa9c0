//! The fault suite's cluster: three NATS servers, and RingMQ nodes as real processes, each
//! reaching every server through a [`Relay`] of its own; the faults it injects and heals.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::relay::{Mode, Relay};
use crate::nats_cluster::NatsCluster;
use crate::ports::free_port;
use crate::process::BrokerProcess;

/// One fault, healed by [`Rig::heal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// NATS server `n` killed (SIGKILL), started again at the heal.
    KillNats(usize),
    /// NATS server `n` frozen (SIGSTOP), thawed (SIGCONT) at the heal.
    FreezeNats(usize),
    /// Node `n` cut off from every NATS server (its relays close their connections).
    CutNode(usize),
    /// Node `n`'s links to NATS stalled (bytes held, delivered intact at the heal).
    StallNode(usize),
    /// Node `n`'s links to NATS slowed by 100 ms a chunk.
    SlowNode(usize),
    /// Node `n` killed (SIGKILL), started again with its store at the heal.
    KillNode(usize),
    /// Node `n` frozen (SIGSTOP), thawed at the heal.
    FreezeNode(usize),
}

impl Fault {
    /// The fault's kind, for the results table.
    pub fn kind(self) -> &'static str {
        match self {
            Fault::KillNats(_) => "kill NATS server",
            Fault::FreezeNats(_) => "freeze NATS server",
            Fault::CutNode(_) => "cut node from NATS",
            Fault::StallNode(_) => "stall node's links",
            Fault::SlowNode(_) => "slow node's links",
            Fault::KillNode(_) => "kill node",
            Fault::FreezeNode(_) => "freeze node",
        }
    }
}

struct Node {
    process: Option<BrokerProcess>,
    addr: SocketAddr,
    http: u16,
    config: String,
    config_path: PathBuf,
    /// One per NATS server, in server order.
    relays: Vec<Relay>,
}

/// The cluster under test.
pub struct Rig {
    nats: NatsCluster,
    nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// Three NATS servers and `nodes` nodes (`node_timeout_ms` 3 s, `ack_timeout_ms` 5 s,
    /// a redb store each), every node connected and its buckets open.
    pub fn start(nodes: usize) -> Self {
        let nats = NatsCluster::start();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let nodes = (0..nodes)
            .map(|index| start_node(&nats, &dir, index))
            .collect();
        let rig = Self {
            nats,
            nodes,
            _dir: dir,
        };
        for index in 0..rig.nodes.len() {
            rig.wait_ready(index);
        }
        rig
    }

    /// Node `index`'s MQTT address.
    pub fn addr(&self, index: usize) -> SocketAddr {
        self.nodes[index].addr
    }

    /// Every node's MQTT address, in order.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.nodes.iter().map(|node| node.addr).collect()
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Node `index`'s `/metrics` document, `None` while it does not answer.
    pub fn metrics(&self, index: usize) -> Option<String> {
        crate::nats_cluster::http_get(self.nodes[index].http, "/metrics")
    }

    fn wait_ready(&self, index: usize) {
        crate::harness::wait_until_within(
            std::time::Duration::from_secs(60),
            "a node connected to NATS with its buckets open",
            || {
                let document = self.metrics(index)?;
                let ready = crate::cluster::metric(&document, "ringmq_cluster_ownership_ready")?;
                let connected = crate::cluster::metric(&document, "ringmq_cluster_connected")?;
                (ready == 1 && connected == 1).then_some(())
            },
        );
    }

    pub fn inject(&mut self, fault: Fault) {
        match fault {
            Fault::KillNats(n) => self.nats.stop(n),
            Fault::FreezeNats(n) => self.nats.pause(n),
            Fault::CutNode(n) => self.links(n, Mode::Cut),
            Fault::StallNode(n) => self.links(n, Mode::Paused),
            Fault::SlowNode(n) => self.links(n, Mode::Slow(std::time::Duration::from_millis(100))),
            Fault::KillNode(n) => {
                if let Some(process) = self.nodes[n].process.take() {
                    process.kill_9();
                }
            }
            Fault::FreezeNode(n) => signal(self.nodes[n].process.as_ref(), "-STOP"),
        }
    }

    pub fn heal(&mut self, fault: Fault) {
        match fault {
            Fault::KillNats(n) => self.nats.restart(n),
            Fault::FreezeNats(n) => self.nats.resume(n),
            Fault::CutNode(n) | Fault::StallNode(n) | Fault::SlowNode(n) => {
                self.links(n, Mode::Open);
            }
            Fault::KillNode(n) => {
                let node = &mut self.nodes[n];
                let mut process =
                    BrokerProcess::start_on(node.addr, &node.config, &node.config_path);
                process.wait_serving();
                node.process = Some(process);
                self.wait_ready(n);
            }
            Fault::FreezeNode(n) => signal(self.nodes[n].process.as_ref(), "-CONT"),
        }
    }

    fn links(&self, node: usize, mode: Mode) {
        for relay in &self.nodes[node].relays {
            relay.set(mode);
        }
    }
}

fn signal(process: Option<&BrokerProcess>, signal: &str) {
    let Some(process) = process else { return };
    let status = std::process::Command::new("kill")
        .args([signal, &process.pid().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {signal}");
}

fn start_node(nats: &NatsCluster, dir: &tempfile::TempDir, index: usize) -> Node {
    let relays: Vec<Relay> = (0..3)
        .map(|server| {
            let url = nats.url(server);
            let port = url.rsplit(':').next().and_then(|p| p.parse().ok());
            Relay::start(([127, 0, 0, 1], port.expect("a NATS port")).into())
        })
        .collect();
    // Every server, each through this node's own relay to it.
    let servers: Vec<String> = relays
        .iter()
        .map(|relay| format!("\"nats://{}\"", relay.addr()))
        .collect();
    let http = free_port();
    let store = dir.path().join(format!("store-{index}"));
    std::fs::create_dir_all(&store).expect("the node's store directory");
    let config = format!(
        "[cluster]\nnode_id = \"f{index}\"\nnats = [{}]\nreplicas = 3\nnode_timeout_ms = 3000\n\
         ack_timeout_ms = 5000\n[http]\nbind = \"127.0.0.1:{http}\"\n\
         [persistence]\nengine = \"redb\"\ndir = \"{}\"\n\
         [queues]\nmax_queued_messages = 100000\n",
        servers.join(", "),
        store.display()
    );
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let config_path = dir.path().join(format!("f{index}.toml"));
    let process = BrokerProcess::start_on(addr, &config, &config_path);
    Node {
        process: Some(process),
        addr,
        http,
        config,
        config_path,
        relays,
    }
}
