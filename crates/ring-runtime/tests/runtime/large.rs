//! Several MiB in many fragments, with a slow reader forcing partial writes.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::mpsc;

use bytes::Bytes;
use ring_runtime::{ConnId, Handler, ShardCtx};

use crate::common::{self, Echo};

const TOTAL: usize = 6 * 1024 * 1024;

/// On accept, queues `TOTAL` bytes as ~3,000 frames of varying sizes in one turn and reports
/// the queued byte count it saw.
struct Blaster {
    queued: mpsc::Sender<usize>,
}

fn fragments() -> Vec<Bytes> {
    let data = Bytes::from(common::pattern(42, TOTAL));
    let mut frames = Vec::new();
    let mut offset = 0;
    let mut size = 1;
    while offset < TOTAL {
        let end = (offset + size).min(TOTAL);
        frames.push(data.slice(offset..end));
        offset = end;
        size = (size * 7 + 13) % 4099 + 1;
    }
    frames
}

impl Handler for Blaster {
    type Message = ();

    fn on_accept(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, _peer: SocketAddr) {
        for frame in fragments() {
            ctx.send(conn, frame).unwrap();
        }
        self.queued.send(ctx.queued_bytes(conn)).unwrap();
        ctx.close(conn);
    }

    fn on_data(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _data: Bytes) {}
}

#[test]
fn multi_mib_fragmented_send_survives_partial_writes() {
    assert!(
        fragments().len() > 2000,
        "enough fragments for several writev batches"
    );
    let (tx, rx) = mpsc::channel();
    let Some(handle) = common::start(common::config(1), move |_| Blaster { queued: tx.clone() })
    else {
        return;
    };
    let mut stream = common::client(handle.local_addrs()[0]);
    let mut received = Vec::with_capacity(TOTAL);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut reads = 0;
    loop {
        let read = stream.read(&mut chunk).unwrap();
        if read == 0 {
            break;
        }
        received.extend_from_slice(&chunk[..read]);
        reads += 1;
        if reads % 8 == 0 {
            // A slow reader: the socket buffer fills and writes come back short.
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    assert_eq!(rx.recv_timeout(common::HANG).unwrap(), TOTAL);
    assert_eq!(received.len(), TOTAL);
    assert!(
        received == common::pattern(42, TOTAL),
        "bytes arrive intact and in order"
    );
}

#[test]
fn multi_mib_upload_in_fragments_echoes_back() {
    let Some(handle) = common::start(common::config(2), |_| Echo) else {
        return;
    };
    let mut stream = common::client(handle.local_addrs()[0]);
    let mut reader = stream.try_clone().unwrap();
    let message = common::pattern(7, TOTAL);
    let echo = std::thread::spawn(move || common::read_exact(&mut reader, TOTAL));
    let mut offset = 0;
    let mut size = 3;
    while offset < TOTAL {
        let end = (offset + size).min(TOTAL);
        common::write_all(&mut stream, &message[offset..end]);
        offset = end;
        size = (size * 5 + 11) % 70_001 + 1;
    }
    assert!(echo.join().unwrap() == message);
}
