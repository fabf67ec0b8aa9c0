//! A stored session whose client comes back asking for session expiry 0 (5.0: the session ends
//! with this connection) stops being stored, yet gets every message queued for it, those kept
//! on disk included, and the store is never asked to record the send of a copy it no longer
//! holds (issue 52: "stored write skipped").

use codec::{ProtocolVersion, QoS};

use crate::client::{RawClient, persistent_connect};
use crate::harness::TestBroker;

const V5: ProtocolVersion = ProtocolVersion::V5;

#[test]
fn a_session_resumed_with_expiry_0_gets_its_queue_and_skips_no_stored_write() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}memory_queue_messages = 10\n",
        crate::persistence::store_config("log", dir.path())
    );
    let broker = TestBroker::with_store(&config);
    let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "comes-back", 3600));
    sub.subscribe("expiry/#", QoS::AtLeastOnce);
    sub.disconnect();
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "publisher");
    crate::admin::publish_acked_in_windows(&mut publisher, "expiry/a", 100, 20);
    publisher.disconnect();
    // Back with Clean Start 0 and no Session Expiry Interval: expiry 0 from now on.
    let mut back = RawClient::connected(broker.addr(), persistent_connect(V5, "comes-back", 0));
    for i in 0..100 {
        let publish = back.expect_publish_acked();
        assert_eq!(publish.topic(), "expiry/a", "message {i}");
    }
    back.ping();
    // Dropping the test broker asserts that no stored write was skipped.
}
