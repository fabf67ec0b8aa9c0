//! A broker started again at once after `kill -9` on the same port (as a supervisor with
//! `Restart=on-failure` does) starts and serves, although the killed process's listening
//! sockets, held by its io_uring rings, close only some milliseconds after it is reaped.

use codec::{ProtocolVersion, ReasonCode};

use crate::client::{RawClient, connect_packet};
use crate::process::BrokerProcess;

#[test]
fn a_broker_restarted_at_once_after_kill_9_starts_and_serves_every_time() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("ringmq.toml");
    let text = "[runtime]\nshards = 2\n[persistence]\nengine = \"none\"\n";
    let mut broker = BrokerProcess::start(text, &config);
    let addr = broker.addr;
    for round in 0..20 {
        let (_client, connack) = RawClient::connect(
            addr,
            connect_packet(ProtocolVersion::V5, &format!("round-{round}"), true),
        );
        assert_eq!(connack.reason_code, ReasonCode::Success, "round {round}");
        broker.kill_9();
        broker = BrokerProcess::start_on(addr, text, &config);
        broker.wait_serving();
    }
}
