//! Datagram endpoints and virtual connections, over real UDP sockets on loopback, with the toy
//! protocol of `toy_datagram.rs`.

use std::net::SocketAddr;

use ring_runtime::{
    ConnId, DatagramListen, DatagramStats, Runtime, RuntimeConfig, RuntimeError, RuntimeHandle,
    ShardId,
};

use crate::common::{config, pattern, start, wait_until};
use crate::toy_datagram::{CHUNK, Log, ToyClient, ToyDriver, ToyEcho};

/// A runtime of `shards` shards serving the toy protocol on an ephemeral loopback UDP port.
pub fn toy_runtime(
    shards: usize,
    adjust: impl FnOnce(&mut RuntimeConfig),
) -> Option<(RuntimeHandle<ConnId>, SocketAddr, Log)> {
    let log = Log::default();
    let mut config = RuntimeConfig {
        listen: Vec::new(),
        datagram_listen: vec![DatagramListen {
            addr: "127.0.0.1:0".parse().unwrap(),
            driver: ToyDriver::factory(log.clone()),
        }],
        ..config(shards)
    };
    adjust(&mut config);
    let handler_log = log.clone();
    let handle = start(config, move |_| ToyEcho {
        log: handler_log.clone(),
    })?;
    let server = handle.datagram_addrs()[0];
    assert_ne!(server.port(), 0, "port 0 resolved");
    Some((handle, server, log))
}

/// Shuts down and adds up every shard's datagram counters.
pub fn stop(handle: RuntimeHandle<ConnId>) -> DatagramStats {
    handle.shutdown();
    let stats = handle.join().unwrap();
    stats
        .iter()
        .fold(DatagramStats::default(), |mut all, shard| {
            let d = shard.datagrams;
            all.received += d.received;
            all.sent += d.sent;
            all.send_queue_full += d.send_queue_full;
            all.send_failed += d.send_failed;
            all.forwarded += d.forwarded;
            all.forward_dropped += d.forward_dropped;
            all.forwarded_in += d.forwarded_in;
            all.opened += d.opened;
            all
        })
}

#[test]
fn a_virtual_connection_echoes_like_a_tcp_one() {
    let Some((handle, server, log)) = toy_runtime(1, |_| {}) else {
        return;
    };
    let client = ToyClient::open(server, 1);
    assert_eq!(client.round_trip(b"hello"), b"hello");
    assert_eq!(client.round_trip(b"again"), b"again");
    let local = client.socket.local_addr().unwrap();
    assert_eq!(client.ask(b"peer?"), local.to_string());
    assert!(
        log.contains(&format!("accept on {server}")),
        "local_addr is the endpoint's"
    );
    // Long answers leave as a GSO train where the kernel takes one, else datagram by datagram.
    client.send(b"big");
    assert_eq!(client.read_stream(5000), pattern(7, 5000));
    wait_until("the driver's deadline", || log.count_prefix("timeout") == 1);
    let stats = stop(handle);
    assert_eq!(stats.opened, 1);
    assert!(stats.received >= 5, "{stats:?}");
    // Sent: the id, three answers, `big` (one GSO train or five datagrams), the goodbye.
    let gso = log.contains("gso true");
    assert_eq!(stats.sent, if gso { 6 } else { 10 }, "{stats:?}");
    assert!(
        log.contains("closed Shutdown"),
        "shutdown closes virtual connections"
    );
}

#[test]
fn many_peers_at_once() {
    let Some((handle, server, log)) = toy_runtime(2, |_| {}) else {
        return;
    };
    let clients: Vec<ToyClient> = (0..40)
        .map(|token| ToyClient::open(server, token))
        .collect();
    for round in 0..3u64 {
        for (index, client) in clients.iter().enumerate() {
            client.send(&pattern(round * 100 + index as u64, 300));
        }
        for (index, client) in clients.iter().enumerate() {
            assert_eq!(
                client.read_stream(300),
                pattern(round * 100 + index as u64, 300)
            );
        }
    }
    let stats = stop(handle);
    assert_eq!(stats.opened, 40);
    assert_eq!(log.count_prefix("accept on"), 40);
    assert_eq!(log.count_prefix("closed Shutdown"), 40);
}

#[test]
fn single_shot_receives_serve_too() {
    // io_uring's receive without multishot RECVMSG (older kernels); epoll ignores the flag.
    let Some((handle, server, _log)) = toy_runtime(2, |config| {
        config.datagram_recv_multishot = false;
        config.datagram_recv_depth = 2;
    }) else {
        return;
    };
    let clients: Vec<ToyClient> = (0..8).map(|token| ToyClient::open(server, token)).collect();
    for (index, client) in clients.iter().enumerate() {
        client.send(&pattern(index as u64, 200));
    }
    for (index, client) in clients.iter().enumerate() {
        assert_eq!(client.read_stream(200), pattern(index as u64, 200));
    }
    assert_eq!(stop(handle).opened, 8);
}

#[test]
fn a_dry_datagram_buffer_ring_loses_nothing() {
    // io_uring: two provided buffers for a burst of 40 datagrams; each time the ring runs dry
    // the multishot receive ends and is armed again, the datagram still in the socket.
    let Some((handle, server, _log)) = toy_runtime(1, |config| config.datagram_recv_buffers = 2)
    else {
        return;
    };
    let clients: Vec<ToyClient> = (0..40)
        .map(|token| ToyClient::open(server, token))
        .collect();
    for (index, client) in clients.iter().enumerate() {
        client.send(&pattern(index as u64, 100));
    }
    for (index, client) in clients.iter().enumerate() {
        assert_eq!(client.read_stream(100), pattern(index as u64, 100));
    }
    stop(handle);
}

#[test]
fn a_peer_that_changes_its_port_keeps_its_connection() {
    let Some((handle, server, log)) = toy_runtime(2, |_| {}) else {
        return;
    };
    let mut client = ToyClient::open(server, 7);
    let conn = client.ask(b"conn?");
    // Enough new ports that some hash to the other shard: those datagrams are forwarded.
    for _ in 0..24 {
        client.rebind();
        assert_eq!(client.ask(b"conn?"), conn, "the same connection");
        let local = client.socket.local_addr().unwrap();
        assert_eq!(client.ask(b"peer?"), local.to_string(), "peer_addr follows");
    }
    assert_eq!(log.count_prefix("moved"), 24);
    let stats = stop(handle);
    assert_eq!(stats.opened, 1, "no second connection");
    assert!(
        stats.forwarded >= 1,
        "some datagrams reached the other shard: {stats:?}"
    );
    assert_eq!(stats.forwarded, stats.forwarded_in);
    assert_eq!(stats.forward_dropped, 0);
}

#[test]
fn a_full_forward_queue_drops_and_counts() {
    let Some((handle, server, log)) = toy_runtime(2, |config| config.datagram_forward_queue = 1)
    else {
        return;
    };
    let mut client = ToyClient::open(server, 12);
    // The owner's thread waits in the handler: nothing drains its forward queue.
    client.send(b"block");
    wait_until("the owner blocks", || log.contains("blocked"));
    for _ in 0..32 {
        client.rebind();
        client.send(b"x");
    }
    // Of 32 ports, some hash to the other shard: one datagram fits the queue, the next not.
    wait_until("a refused forward", || log.contains("forward refused"));
    log.open_gate();
    let stats = stop(handle);
    assert!(stats.forward_dropped >= 1, "{stats:?}");
    assert_eq!(
        stats.forward_dropped,
        log.count_prefix("forward refused") as u64
    );
    assert!(stats.forwarded >= 1, "{stats:?}");
}

#[test]
fn paused_reading_holds_the_bytes_until_resumed() {
    let Some((handle, server, log)) = toy_runtime(1, |_| {}) else {
        return;
    };
    let client = ToyClient::open(server, 3);
    let conn = ConnId::from_u64(client.ask(b"conn?").parse().unwrap());
    assert_eq!(client.ask(b"pause"), "paused");
    wait_until("the driver hears of the pause", || {
        log.contains("paused true")
    });
    client.send(b"one ");
    client.send(b"two");
    let shard = ShardId::new(u16::from(client.shard));
    handle.post(shard, vec![conn]).unwrap();
    assert_eq!(
        client.read_stream(7),
        b"one two",
        "in order, after the resume"
    );
    assert!(log.contains("paused false"));
    stop(handle);
}

#[test]
fn the_peer_closes() {
    let Some((handle, server, log)) = toy_runtime(1, |_| {}) else {
        return;
    };
    let client = ToyClient::open(server, 4);
    assert_eq!(client.round_trip(b"x"), b"x");
    client.close();
    wait_until("on_closed", || log.contains("closed PeerClosed"));
    let stats = stop(handle);
    assert_eq!(stats.opened, 1);
    assert!(
        !log.contains("driver close Graceful"),
        "the driver closed it itself"
    );
}

#[test]
fn the_handler_closes_after_its_last_frame() {
    let Some((handle, server, log)) = toy_runtime(1, |_| {}) else {
        return;
    };
    let client = ToyClient::open(server, 5);
    client.send(b"bye");
    assert_eq!(client.read_stream(4), b"bye!", "queued frames first");
    assert_eq!(client.receive(), b"C");
    wait_until("on_closed", || log.contains("closed Local"));
    assert!(log.contains("driver close Graceful"));
    stop(handle);
}

#[test]
fn the_handler_aborts() {
    let Some((handle, server, log)) = toy_runtime(1, |_| {}) else {
        return;
    };
    let client = ToyClient::open(server, 10);
    client.send(b"kill");
    assert_eq!(client.receive(), b"C", "the queued answer is dropped");
    wait_until("on_closed", || log.contains("closed Local"));
    assert!(log.contains("driver close Abort"));
    stop(handle);
}

#[test]
fn shutdown_write_ends_the_stream_and_reading_goes_on() {
    let Some((handle, server, log)) = toy_runtime(1, |_| {}) else {
        return;
    };
    let client = ToyClient::open(server, 6);
    client.send(b"half");
    assert_eq!(client.read_stream(4), b"last");
    assert_eq!(client.receive(), b"F");
    client.send(b"still read");
    wait_until("the handler reads on", || {
        log.contains("read after shutdown_write: still read")
    });
    stop(handle);
}

#[test]
fn a_full_send_queue_drops_and_counts() {
    let Some((handle, server, _log)) = toy_runtime(1, |config| {
        config.datagram_send_queue = 4;
        // One queue entry per datagram: no GSO train.
        config.datagram_gso = false;
    }) else {
        return;
    };
    let client = ToyClient::open(server, 8);
    client.send(b"flood");
    // The queue keeps the first four of 32 datagrams.
    assert_eq!(client.read_stream(4 * CHUNK), vec![b'f'; 4 * CHUNK]);
    let stats = stop(handle);
    assert_eq!(stats.send_queue_full, 28, "{stats:?}");
}

#[test]
fn receive_offload_buffers_still_carry_single_datagrams() {
    let Some((handle, server, _log)) = toy_runtime(1, |config| config.datagram_gro = true) else {
        return;
    };
    let client = ToyClient::open(server, 9);
    assert_eq!(client.round_trip(b"gro"), b"gro");
    stop(handle);
}

#[test]
fn every_shard_binds_a_fixed_port_that_nothing_else_holds() {
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Some((handle, server, _log)) = toy_runtime(2, |config| {
        config.datagram_listen[0].addr = addr;
    }) else {
        return;
    };
    assert_eq!(server, addr);
    let client = ToyClient::open(server, 11);
    assert_eq!(client.round_trip(b"fixed"), b"fixed");
    stop(handle);
}

#[test]
fn a_udp_port_held_by_another_socket_is_refused() {
    // Another broker's socket: SO_REUSEPORT would let this one join it unnoticed.
    let holder = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    holder.set_reuse_port(true).unwrap();
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    holder.bind(&any_port.into()).unwrap();
    let addr = holder.local_addr().unwrap().as_socket().unwrap();
    let config = RuntimeConfig {
        listen: Vec::new(),
        datagram_listen: vec![DatagramListen {
            addr,
            driver: ToyDriver::factory(Log::default()),
        }],
        ..config(2)
    };
    let started = Runtime::start(config, |_| ToyEcho {
        log: Log::default(),
    });
    match started {
        Err(RuntimeError::Bind { addr: refused, .. }) => assert_eq!(refused, addr),
        Err(other) => panic!("expected a bind error, got {other}"),
        Ok(_) => panic!("a second socket joined a port another one holds"),
    }
}

#[test]
fn ipv6_peers_are_served_and_followed() {
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        crate::common::skip(&"no IPv6 loopback here");
        return;
    }
    let Some((handle, server, _log)) = toy_runtime(2, |config| {
        config.datagram_listen[0].addr = "[::1]:0".parse().unwrap();
    }) else {
        return;
    };
    let mut client = ToyClient::open(server, 13);
    assert_eq!(client.round_trip(b"six"), b"six");
    client.rebind();
    let local = client.socket.local_addr().unwrap();
    assert_eq!(client.ask(b"peer?"), local.to_string());
    stop(handle);
}
