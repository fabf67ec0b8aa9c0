//! Send queues of subscribers that never read (issue 47, defect 9): together they hold no more
//! than `queues.max_total_outbound_bytes` (beyond it a connection that holds 64 KiB takes no
//! more), while the publisher and other subscribers go on.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::net::TcpStream;
use std::time::Duration;

use codec::{Packet, QoS};
use socket2::{Domain, Socket, Type};

use crate::client::{RawClient, V311, connect_packet, publish_packet};
use crate::cluster::metric;
use crate::harness::wait_until_within;
use crate::nats_cluster::http_get;
use crate::process::BrokerProcess;

/// Subscribers that never read.
const STALLED: usize = 20;
/// `queues.max_total_outbound_bytes` in these tests: 8 MiB, against the 80 MiB the stalled
/// subscribers' own bounds (`queues.outbound_bytes`, 4 MiB each) would let them hold.
const TOTAL: u64 = 8 << 20;
/// What a connection may hold beyond the budget (`broker_core::outbound::OVER_BUDGET_ALLOWANCE`).
const ALLOWANCE: u64 = 64 << 10;
/// RSS beyond what the send queues may hold: the connections' own state, the publisher's
/// reads, the allocator's pages not yet handed back. Without the budget the stalled queues
/// alone grow the RSS by 80 to 160 MiB.
const MARGIN: u64 = 24 << 20;

/// A subscriber to `flood/#` at QoS 0 whose receive buffer is small, so the kernel holds
/// little for it and the broker's send queue fills soon.
fn stalled_subscriber(addr: std::net::SocketAddr, index: usize) -> RawClient {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut client = RawClient::over(TcpStream::from(socket), V311);
    client.send(&Packet::from(connect_packet(
        V311,
        &format!("stalled-{index}"),
        true,
    )));
    client.expect_connack();
    client.subscribe("flood/#", QoS::AtMostOnce);
    client
}

/// One batch of QoS 0 PUBLISHes of 200 bytes to `flood/t`, as bytes to write at once.
fn flood_batch(count: usize) -> Vec<u8> {
    let packet = Packet::Publish(publish_packet(
        "flood/t",
        &[b'f'; 200],
        QoS::AtMostOnce,
        None,
    ));
    let mut one = bytes::BytesMut::new();
    codec::encode(&packet, V311, &mut one).unwrap();
    one.repeat(count)
}

fn scrape(port: u16) -> String {
    http_get(port, "/metrics").expect("the metrics listener answers")
}

fn slow_consumer_drops(document: &str) -> u64 {
    metric(
        document,
        "ringmq_message_drops_total{reason=\"slow_consumer\"}",
    )
    .unwrap_or(0)
}

#[test]
fn subscribers_that_never_read_hold_the_broker_wide_outbound_budget() {
    let dir = tempfile::tempdir().unwrap();
    let http = crate::ports::free_port();
    let config = format!(
        "[runtime]\nshards = 2\n[persistence]\nengine = \"none\"\n\
         [http]\nbind = \"127.0.0.1:{http}\"\n\
         [queues]\nmax_total_outbound_bytes = {TOTAL}\n\
         [limits]\nfree_memory_hold_ms = 0\n"
    );
    let broker = BrokerProcess::start(&config, &dir.path().join("ringmq.toml"));
    let stalled: Vec<_> = (0..STALLED)
        .map(|i| stalled_subscriber(broker.addr, i))
        .collect();
    let mut bystander = RawClient::connected_clean(broker.addr, V311, "bystander");
    bystander.subscribe("other", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr, V311, "flooder");
    let before = broker.memory("VmRSS");
    let batch = flood_batch(2_000);
    // Rounds of 2,000 PUBLISHes until a whole round's copies for the stalled subscribers are
    // dropped: every stalled queue then takes no more.
    let mut drops = slow_consumer_drops(&scrape(http));
    wait_until_within(Duration::from_secs(90), "every stalled queue full", || {
        publisher.send_raw(&batch);
        publisher.ping();
        let now = slow_consumer_drops(&scrape(http));
        let round = now - drops;
        drops = now;
        (round >= (2_000 * STALLED) as u64).then_some(())
    });
    let loaded = broker.memory("VmRSS");
    let document = scrape(http);
    let queued = metric(&document, "ringmq_outbound_bytes").unwrap();
    assert!(
        queued <= TOTAL + STALLED as u64 * ALLOWANCE,
        "send queues hold {queued} B, over the {TOTAL} B budget"
    );
    let growth = loaded.saturating_sub(before);
    assert!(
        growth <= TOTAL + MARGIN,
        "RSS grew by {} MiB (from {} MiB), over the {} MiB budget + {} MiB",
        growth >> 20,
        before >> 20,
        TOTAL >> 20,
        MARGIN >> 20
    );
    // The publisher and a subscriber that reads are not held back.
    publisher.publish_simple("other", b"still here", QoS::AtLeastOnce);
    assert_eq!(bystander.expect_publish().payload(), b"still here");
    // What the stalled queues held is given back when they close.
    drop(stalled);
    wait_until_within(Duration::from_secs(20), "send queues emptied", || {
        let queued = metric(&scrape(http), "ringmq_outbound_bytes").unwrap();
        (queued < ALLOWANCE).then_some(())
    });
}
