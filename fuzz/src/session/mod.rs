//! The `broker_session` target: a single-shard broker (`ringmq::sim::SimBroker`, no sockets,
//! a manual clock) driven by a few clients on MQTT 3.1.1 and 5.0 with operations read from the
//! fuzz input. After every operation each client decodes everything the broker sent it, and
//! its model ([`model::Client`]) checks the invariants: no panic, well-formed packets for the
//! client's protocol, CONNACK first, non-zero outgoing packet ids never reused while
//! unacknowledged, the unacknowledged QoS 1/2 PUBLISHes within Receive Maximum and the
//! configured bound, nothing published after an UNSUBACK delivered without a subscription,
//! nothing after a connection ended.

mod input;
mod model;
mod ops;

use std::sync::OnceLock;

use codec::ProtocolVersion;
use ringmq::config::{Config, SlowConsumerPolicy};
use ringmq::sim::SimBroker;

use input::Input;
use model::Client;

/// Clients per run (client identifiers "c0", "c1", ...).
const CLIENTS: usize = 3;
/// Operations per run at most.
const MAX_STEPS: usize = 256;

/// Whether to print each operation and what each client received (`RINGMQ_FUZZ_TRACE=1`, to
/// read a crashing input: `cargo +nightly fuzz run broker_session <input>`).
fn tracing() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("RINGMQ_FUZZ_TRACE").is_some())
}

/// The embedded defaults, parsed once.
fn base_config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let raw = ringmq::config::default_raw().expect("embedded defaults parse");
        raw.validate().expect("embedded defaults are valid")
    })
}

/// Small bounds, so windows fill and queues overflow within a few operations.
fn config(input: &mut Input) -> Config {
    let mut config = base_config().clone();
    config.limits.max_inflight_outbound = [1, 2, 3, 8][usize::from(input.below(4))];
    config.limits.receive_maximum = [1, 2, 16, 1024][usize::from(input.below(4))];
    config.queues.max_queued_messages = [1, 2, 8][usize::from(input.below(3))];
    config.queues.slow_consumer_policy = if input.flag() {
        SlowConsumerPolicy::Disconnect
    } else {
        SlowConsumerPolicy::DropOldest
    };
    config
}

/// The broker and what the clients know.
pub struct World {
    broker: SimBroker,
    clients: Vec<Client>,
    /// Messages published so far (each PUBLISH's payload is its number).
    seq: u64,
    next_link: u32,
    inflight_bound: usize,
}

/// Runs one fuzz input.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let config = config(&mut input);
    let inflight_bound = usize::from(config.limits.max_inflight_outbound);
    let mut world = World {
        broker: SimBroker::new(config),
        clients: (0..CLIENTS).map(Client::new).collect(),
        seq: 0,
        next_link: 0,
        inflight_bound,
    };
    for _ in 0..MAX_STEPS {
        if input.is_empty() {
            break;
        }
        world.step(&mut input);
        world.observe();
        assert!(world.broker.shard().settled(), "the shard kept itself busy");
    }
}

impl World {
    /// Decodes what every connection received and lets its client check it.
    fn observe(&mut self) {
        for client in &mut self.clients {
            let links = client.link.iter_mut().chain(client.old.iter_mut());
            let mut received = Vec::new();
            for link in links {
                let protocol = link.protocol.unwrap_or(ProtocolVersion::V5);
                if link.garbled {
                    decodes_as_some_protocol(&self.broker.take_output(link.conn));
                    continue;
                }
                let packets = self.broker.received(link.conn, protocol);
                let packets = packets.unwrap_or_else(|e| panic!("undecodable output: {e}"));
                received.push((link.no, packets));
            }
            for (no, packets) in received {
                if tracing() && !packets.is_empty() {
                    eprintln!("  client {} link {no} <- {packets:?}", client.index);
                }
                client.observe(no, packets, self.seq);
            }
            for link in client.link.iter_mut().chain(client.old.iter_mut()) {
                link.done = self.broker.write_shut(link.conn);
            }
            // Ended connections have nothing more to say.
            client.old.retain(|link| !link.done);
        }
    }
}

/// Output of a connection whose protocol the broker may have read from garbage: it must decode
/// whole as 3.1.1 or as 5.0.
fn decodes_as_some_protocol(output: &[u8]) {
    let decodes = |protocol| {
        let mut buf = bytes::BytesMut::from(output);
        let limits = codec::Limits::new(protocol);
        while let Ok(Some(_)) = codec::decode(&mut buf, &limits) {}
        buf.is_empty()
    };
    assert!(
        decodes(ProtocolVersion::V3_1_1) || decodes(ProtocolVersion::V5),
        "undecodable output: {output:?}"
    );
}
