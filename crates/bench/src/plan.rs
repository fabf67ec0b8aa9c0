//! Turns a command into the list of clients to run: who connects where, and what each does.

use std::net::SocketAddr;

use anyhow::{Context, bail};
use codec::{MqttStr, ProtocolVersion, QoS};

use crate::cli::{Command, Common, ProbeArgs, PublishArgs};
use crate::phase::PhaseMode;

/// What one client does once connected.
#[derive(Debug, Clone)]
pub enum Role {
    /// Nothing: an idle connection.
    Idle,
    /// Publishes to `topic`.
    Publisher {
        topic: MqttStr,
        /// Index carried in every payload (for per-publisher order tracking).
        index: u32,
    },
    /// Subscribes to `filter`.
    Subscriber { filter: MqttStr },
    /// Subscribes to `topic`, then publishes to it (the latency probe).
    Probe { topic: MqttStr },
    /// Resumes a persistent session: subscribes to nothing, receives what was queued.
    Resume,
}

/// One client to run.
#[derive(Debug, Clone)]
pub struct ClientPlan {
    pub client_id: MqttStr,
    pub host: SocketAddr,
    pub bind: Option<SocketAddr>,
    pub role: Role,
}

/// Publishing settings shared by every publisher of a run.
#[derive(Debug, Clone, Copy)]
pub struct PublishPlan {
    pub qos: QoS,
    pub size: usize,
    /// Messages per second per publisher; 0 = flood.
    pub rate: f64,
    /// Messages per publisher; 0 = unlimited.
    pub limit: u64,
    pub inflight: u16,
    pub warmup_secs: u64,
    /// Where rate-limited publishers' sends fall within the period (`--phase`).
    pub phase: PhaseMode,
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub label: String,
    pub clients: Vec<ClientPlan>,
    pub publish: Option<PublishPlan>,
    /// Subscription QoS.
    pub sub_qos: QoS,
    /// How many copies of each sent message subscribers should receive in total (`None`: the
    /// expected count is given absolutely by `expect_total`).
    pub fan: Option<u64>,
    pub expect_total: u64,
    pub protocol: ProtocolVersion,
    /// The user name every CONNECT carries (`--username`).
    pub username: Option<MqttStr>,
    pub common: Common,
}

/// `--username` as an MQTT string.
pub(crate) fn username(common: &Common) -> anyhow::Result<Option<MqttStr>> {
    common
        .username
        .as_ref()
        .map(|name| {
            MqttStr::from_bytes(name.clone().into())
                .map_err(|e| anyhow::anyhow!("bad user name: {e}"))
        })
        .transpose()
}

pub(crate) fn qos(value: u8) -> anyhow::Result<QoS> {
    QoS::from_u8(value).with_context(|| format!("QoS {value} is not 0, 1 or 2"))
}

pub(crate) fn protocol(version: u8) -> anyhow::Result<ProtocolVersion> {
    Ok(match version {
        3 => ProtocolVersion::V3_1,
        4 => ProtocolVersion::V3_1_1,
        5 => ProtocolVersion::V5,
        other => bail!("MQTT version {other} is not 3, 4 or 5"),
    })
}

fn publish_plan(args: &PublishArgs) -> anyhow::Result<PublishPlan> {
    Ok(PublishPlan {
        qos: qos(args.qos)?,
        size: args.size,
        rate: args.rate,
        limit: args.limit,
        inflight: args.inflight.max(1),
        warmup_secs: args.warmup,
        phase: args.phase,
    })
}

fn probe_plan(args: &ProbeArgs) -> anyhow::Result<PublishPlan> {
    if args.interval_ms == 0 {
        bail!("--interval-ms must be at least 1");
    }
    Ok(PublishPlan {
        qos: qos(args.qos)?,
        size: args.size,
        rate: 1000.0 / args.interval_ms as f64,
        limit: args.samples,
        inflight: 1,
        warmup_secs: args.warmup,
        // One probe: it starts one warm-up after its SUBACK, as it always did.
        phase: PhaseMode::Connack,
    })
}

/// Expands `%i` (index) and `%c` (client id) in a topic pattern.
pub(crate) fn expand(pattern: &str, index: usize, client_id: &str) -> anyhow::Result<MqttStr> {
    let text = pattern
        .replace("%i", &index.to_string())
        .replace("%c", client_id);
    MqttStr::from_bytes(text.into()).map_err(|e| anyhow::anyhow!("bad topic {pattern:?}: {e}"))
}

/// Builds clients named `PREFIX-ROLE-INDEX`, spread over hosts and source addresses.
pub(crate) struct Builder<'a> {
    common: &'a Common,
    pub clients: Vec<ClientPlan>,
}

impl<'a> Builder<'a> {
    /// No clients yet.
    pub fn new(common: &'a Common) -> Self {
        Self {
            common,
            clients: Vec::new(),
        }
    }

    /// Adds client `PREFIX-KIND-INDEX` whose role `role` makes from its id.
    pub fn add(
        &mut self,
        kind: &str,
        index: usize,
        role: impl FnOnce(&str) -> anyhow::Result<Role>,
    ) -> anyhow::Result<()> {
        let n = self.clients.len();
        let id = format!("{}-{kind}-{index}", self.common.client_prefix);
        let host = self.common.host[n % self.common.host.len()];
        let bind = (!self.common.bind.is_empty())
            .then(|| SocketAddr::new(self.common.bind[n % self.common.bind.len()], 0));
        let role = role(&id)?;
        let client_id =
            MqttStr::from_bytes(id.into()).map_err(|e| anyhow::anyhow!("bad client id: {e}"))?;
        self.clients.push(ClientPlan {
            client_id,
            host,
            bind,
            role,
        });
        Ok(())
    }
}

/// The run plan for a command.
pub fn build(command: Command) -> anyhow::Result<RunPlan> {
    let (common, publish, sub_qos, fan, expect_total) = match &command {
        Command::Conn { common, .. } => (common.clone(), None, QoS::AtMostOnce, None, 0),
        Command::Pub {
            common, publish, ..
        } => (
            common.clone(),
            Some(publish_plan(publish)?),
            QoS::AtMostOnce,
            None,
            0,
        ),
        Command::Sub {
            common,
            qos: q,
            expect,
            ..
        } => (common.clone(), None, qos(*q)?, None, *expect),
        Command::Fanout {
            common,
            publish,
            subs,
            ..
        } => (
            common.clone(),
            Some(publish_plan(publish)?),
            qos(publish.qos)?,
            Some(*subs as u64),
            0,
        ),
        Command::Latency { common, probe } => (
            common.clone(),
            Some(probe_plan(probe)?),
            qos(probe.qos)?,
            Some(1),
            0,
        ),
        Command::Offline { .. } => bail!("offline runs in phases (offline::run)"),
        Command::P2p {
            common, publish, ..
        }
        | Command::Shared {
            common, publish, ..
        } => (
            common.clone(),
            Some(publish_plan(publish)?),
            qos(publish.qos)?,
            Some(1),
            0,
        ),
    };
    if common.host.is_empty() {
        bail!("at least one --host is needed");
    }
    let mut b = Builder::new(&common);
    add_clients(&mut b, &command)?;
    Ok(RunPlan {
        label: common.label.clone(),
        clients: b.clients,
        publish,
        sub_qos,
        fan,
        expect_total,
        protocol: protocol(common.mqtt_version)?,
        username: username(&common)?,
        common,
    })
}

fn add_clients(b: &mut Builder<'_>, command: &Command) -> anyhow::Result<()> {
    let publisher = |topic: MqttStr, index: usize| Role::Publisher {
        topic,
        index: index as u32,
    };
    match command {
        Command::Conn { count, .. } => {
            for i in 0..*count {
                b.add("idle", i, |_| Ok(Role::Idle))?;
            }
        }
        Command::Pub { count, topic, .. } => {
            for i in 0..*count {
                b.add("pub", i, |id| Ok(publisher(expand(topic, i, id)?, i)))?;
            }
        }
        Command::Sub { count, topic, .. } => {
            for i in 0..*count {
                b.add("sub", i, |id| {
                    Ok(Role::Subscriber {
                        filter: expand(topic, i, id)?,
                    })
                })?;
            }
        }
        Command::Fanout {
            pubs, subs, topic, ..
        } => {
            for i in 0..*subs {
                b.add("sub", i, |_| {
                    Ok(Role::Subscriber {
                        filter: expand(topic, i, "")?,
                    })
                })?;
            }
            for i in 0..*pubs {
                b.add("pub", i, |_| Ok(publisher(expand(topic, i, "")?, i)))?;
            }
        }
        Command::P2p { pairs, prefix, .. } => {
            for i in 0..*pairs {
                let topic = format!("{prefix}/{i}");
                b.add("sub", i, |_| {
                    Ok(Role::Subscriber {
                        filter: expand(&topic, i, "")?,
                    })
                })?;
                b.add("pub", i, |_| Ok(publisher(expand(&topic, i, "")?, i)))?;
            }
        }
        Command::Shared {
            pubs,
            members,
            topic,
            group,
            ..
        } => {
            let filter = format!("$share/{group}/{topic}");
            for i in 0..*members {
                b.add("member", i, |_| {
                    Ok(Role::Subscriber {
                        filter: expand(&filter, i, "")?,
                    })
                })?;
            }
            for i in 0..*pubs {
                b.add("pub", i, |_| Ok(publisher(expand(topic, i, "")?, i)))?;
            }
        }
        Command::Latency { probe, .. } => {
            b.add("probe", 0, |id| {
                Ok(Role::Probe {
                    topic: expand(&probe.topic, 0, id)?,
                })
            })?;
        }
        Command::Offline { .. } => {}
    }
    Ok(())
}

impl RunPlan {
    /// Publishers in the plan.
    pub fn publisher_count(&self) -> usize {
        self.clients
            .iter()
            .filter(|c| matches!(c.role, Role::Publisher { .. } | Role::Probe { .. }))
            .count()
    }

    /// Messages subscribers should receive for `sent` published messages.
    pub fn expected(&self, sent: u64) -> u64 {
        match self.fan {
            Some(fan) => sent * fan,
            None => self.expect_total,
        }
    }
}
