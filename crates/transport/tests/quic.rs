//! MQTT over QUIC's transport on a real runtime: [`QuicDriver`]s on two shards behind
//! ring-runtime's datagram seam, an echo handler above them (it sees plain stream bytes, as the
//! broker does), and a QUIC client (quinn-proto, driven here over a real UDP socket) that opens
//! the MQTT stream, changes its address mid-connection, and closes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

#[path = "support/quic_client.rs"]
mod quic_client;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use ring_runtime::{
    ConnId, DatagramListen, Handler, Runtime, RuntimeConfig, RuntimeHandle, ShardCtx,
};
use transport::quic::QuicDriver;

use quic_client::{Pki, QuicClient};

/// What the echo handler saw, across shards.
#[derive(Default)]
struct Seen {
    accepted: AtomicUsize,
    closed: AtomicUsize,
}

/// Sends back every byte it reads.
struct Echo(Arc<Seen>);

impl Handler for Echo {
    type Message = ();

    fn on_accept(&mut self, _: &mut ShardCtx<()>, _: ConnId, _: std::net::SocketAddr) {
        self.0.accepted.fetch_add(1, Ordering::SeqCst);
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        let _ = ctx.send(conn, data);
    }

    fn on_closed(&mut self, _: &mut ShardCtx<()>, _: ConnId, _: ring_runtime::CloseReason) {
        self.0.closed.fetch_add(1, Ordering::SeqCst);
    }
}

fn serve(pki: &Pki, shards: usize) -> (RuntimeHandle<()>, std::net::SocketAddr, Arc<Seen>) {
    let listener = pki.listener_config();
    let config = RuntimeConfig {
        shards: Some(shards),
        datagram_listen: vec![DatagramListen {
            addr: "127.0.0.1:0".parse().unwrap(),
            driver: Arc::new(move |setup| Box::new(QuicDriver::new(listener.clone(), setup))),
        }],
        ..RuntimeConfig::default()
    };
    let seen = Arc::new(Seen::default());
    let handler_seen = Arc::clone(&seen);
    let handle = Runtime::start(config, move |_| Echo(Arc::clone(&handler_seen)))
        .expect("the runtime starts");
    let addr = handle.datagram_addrs()[0];
    (handle, addr, seen)
}

#[test]
fn the_mqtt_stream_echoes_and_survives_address_changes() {
    let pki = Pki::new();
    let (handle, server, seen) = serve(&pki, 2);
    let mut client = QuicClient::connect(server, &pki);
    client.open_stream();
    assert_eq!(client.round_trip(b"\x10\x0chello"), b"\x10\x0chello");
    // A long answer crosses several packets and the stream's flow control.
    let long: Vec<u8> = (0..200_000u32).map(|n| (n % 251) as u8).collect();
    assert_eq!(client.round_trip(&long), long);
    // New source ports: the kernel hashes some to the other shard, which forwards them to
    // the owner (the connection id names it); the connection and its stream go on.
    for round in 0..12u8 {
        client.rebind();
        assert_eq!(client.round_trip(&[round; 100]), [round; 100]);
    }
    assert_eq!(
        seen.accepted.load(Ordering::SeqCst),
        1,
        "one virtual connection"
    );
    client.close();
    quic_client::wait_until("the handler saw the close", || {
        seen.closed.load(Ordering::SeqCst) == 1
    });
    handle.shutdown();
    let stats = handle.join().unwrap();
    let forwarded: u64 = stats.iter().map(|s| s.datagrams.forwarded).sum();
    let opened: u64 = stats.iter().map(|s| s.datagrams.opened).sum();
    assert_eq!(opened, 1);
    eprintln!("datagrams forwarded between shards: {forwarded}");
}

#[test]
fn every_client_gets_its_own_connection() {
    let pki = Pki::new();
    let (handle, server, seen) = serve(&pki, 2);
    let mut clients: Vec<QuicClient> = (0..8).map(|_| QuicClient::connect(server, &pki)).collect();
    for (n, client) in clients.iter_mut().enumerate() {
        client.open_stream();
        let message = format!("client {n}");
        assert_eq!(client.round_trip(message.as_bytes()), message.as_bytes());
    }
    assert_eq!(seen.accepted.load(Ordering::SeqCst), 8);
    for client in &mut clients {
        client.close();
    }
    quic_client::wait_until("every close seen", || {
        seen.closed.load(Ordering::SeqCst) == 8
    });
    handle.shutdown();
    handle.join().unwrap();
}
