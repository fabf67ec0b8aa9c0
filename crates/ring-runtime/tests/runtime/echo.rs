//! Echo: single connection, many connections, tiny receive buffers (ENOBUFS pressure).

use std::net::TcpStream;

use crate::common::{self, Echo};

#[test]
fn echo_round_trips_messages() {
    let Some(handle) = common::start(common::config(2), |_| Echo) else {
        return;
    };
    println!("backend: {:?}", handle.backend());
    let mut stream = common::client(handle.local_addrs()[0]);
    for (round, size) in [1usize, 7, 100, 4096, 70_000].into_iter().enumerate() {
        let message = common::pattern(round as u64, size);
        common::write_all(&mut stream, &message);
        assert_eq!(common::read_exact(&mut stream, size), message);
    }
    drop(stream);
    handle.shutdown();
    let stats = handle.join().unwrap();
    assert_eq!(stats.iter().map(|s| s.accepted).sum::<u64>(), 1);
}

#[test]
fn port_zero_resolves_to_one_port_shared_by_all_shards() {
    let mut config = common::config(3);
    config.listen.push("127.0.0.1:0".parse().unwrap());
    let Some(handle) = common::start(config, |_| Echo) else {
        return;
    };
    let addrs = handle.local_addrs().to_vec();
    assert_eq!(addrs.len(), 2);
    assert!(addrs.iter().all(|a| a.port() != 0));
    assert_ne!(addrs[0].port(), addrs[1].port());
    for addr in addrs {
        let mut stream = common::client(addr);
        common::write_all(&mut stream, b"x");
        assert_eq!(common::read_exact(&mut stream, 1), b"x");
    }
}

/// 2,000 concurrent connections, each echoing its own message.
#[test]
fn thousands_of_concurrent_connections() {
    const CONNS: usize = 2000;
    ring_runtime::raise_fd_limit(3 * CONNS as u64 + 256).unwrap();
    let Some(handle) = common::start(common::config(2), |_| Echo) else {
        return;
    };
    let addr = handle.local_addrs()[0];
    let mut streams: Vec<TcpStream> = (0..CONNS).map(|_| common::client(addr)).collect();
    for (index, stream) in streams.iter_mut().enumerate() {
        common::write_all(stream, &common::pattern(index as u64, 100));
    }
    for (index, stream) in streams.iter_mut().enumerate() {
        assert_eq!(
            common::read_exact(stream, 100),
            common::pattern(index as u64, 100)
        );
    }
    drop(streams);
    handle.shutdown();
    let stats = handle.join().unwrap();
    assert_eq!(stats.iter().map(|s| s.accepted).sum::<u64>(), CONNS as u64);
    assert_eq!(stats.iter().map(|s| s.closed).sum::<u64>(), CONNS as u64);
}

/// A 2-buffer, 64-byte receive ring shared by 40 busy connections: the ring runs dry
/// (`ENOBUFS` on io_uring) and receiving must recover without losing or reordering bytes.
#[test]
fn tiny_buffer_ring_under_pressure_loses_nothing() {
    const CONNS: usize = 40;
    const LEN: usize = 64 * 1024;
    let mut config = common::config(1);
    config.recv_buffers = 2;
    config.recv_buffer_size = 64;
    let Some(handle) = common::start(config, |_| Echo) else {
        return;
    };
    let addr = handle.local_addrs()[0];
    let workers: Vec<_> = (0..CONNS)
        .map(|index| {
            std::thread::spawn(move || {
                let mut stream = common::client(addr);
                let message = common::pattern(index as u64, LEN);
                let mut reader = stream.try_clone().unwrap();
                let echo = std::thread::spawn(move || common::read_exact(&mut reader, LEN));
                for chunk in message.chunks(1000) {
                    common::write_all(&mut stream, chunk);
                }
                assert_eq!(echo.join().unwrap(), message);
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    handle.shutdown();
    let stats = handle.join().unwrap();
    println!("ENOBUFS re-arms: {}", stats[0].recv_rearms_enobufs);
}

/// A second runtime on a port another one listens on fails with `AddrInUse` instead of
/// silently joining its `SO_REUSEPORT` group (and taking a share of its connections).
#[test]
fn a_port_in_use_is_refused_not_shared() {
    let Some(first) = common::start(common::config(2), |_| common::Echo) else {
        return;
    };
    let addr = first.local_addrs()[0];
    let mut config = common::config(1);
    config.listen = vec![addr];
    match ring_runtime::Runtime::start(config, |_| common::Echo) {
        Ok(_) => panic!("a second runtime bound {addr}, which the first one listens on"),
        Err(ring_runtime::RuntimeError::Bind { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse);
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
    // The first one still serves.
    let mut stream = common::client(addr);
    common::write_all(&mut stream, b"still here");
    assert_eq!(common::read_exact(&mut stream, 10), b"still here");
}
