//! The epoll backend's read budget: a peer that keeps its socket full gets at most two budgets
//! of reads a turn (see the bound below), however long it floods. (A connection whose budget
//! ran out was once listed for the next turn again on every new edge, so a flood's reads per
//! turn grew turn after turn and starved everything else the shard had to do.)

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ring_runtime::{BackendKind, ConnId, Handler, ShardCtx};

use crate::common;

const READ_BUDGET: usize = 64 * 1024;
const CHUNK: u32 = 16 * 1024;
/// Bytes the flooding client writes in all (bounded), far more than a turn may read.
const FLOOD_BYTES: usize = 256 * 1024 * 1024;
/// Turns to watch while the flood goes on.
const TURNS: usize = 400;

/// Counts the bytes each turn read, and makes every turn last long enough for the flood to
/// refill the socket (and raise new edges) in the meantime.
struct TurnProbe {
    turn_bytes: usize,
    most_in_a_turn: Arc<AtomicUsize>,
    turns_with_data: Arc<AtomicUsize>,
}

impl Handler for TurnProbe {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_data(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, data: Bytes) {
        self.turn_bytes += data.len();
    }

    fn on_turn_end(&mut self, _ctx: &mut ShardCtx<()>) {
        if self.turn_bytes == 0 {
            return;
        }
        self.most_in_a_turn
            .fetch_max(std::mem::take(&mut self.turn_bytes), Ordering::AcqRel);
        self.turns_with_data.fetch_add(1, Ordering::AcqRel);
        // Load shaping, not synchronisation: a slow turn, as a busy shard's is.
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_flooding_peer_gets_a_bounded_read_share_a_turn() {
    let most = Arc::new(AtomicUsize::new(0));
    let turns = Arc::new(AtomicUsize::new(0));
    let mut config = common::config(1);
    config.epoll_read_budget = READ_BUDGET;
    config.recv_buffer_size = CHUNK;
    let (probe_most, probe_turns) = (Arc::clone(&most), Arc::clone(&turns));
    let Some(handle) = common::start(config, move |_| TurnProbe {
        turn_bytes: 0,
        most_in_a_turn: Arc::clone(&probe_most),
        turns_with_data: Arc::clone(&probe_turns),
    }) else {
        return;
    };
    if handle.backend() != BackendKind::Epoll {
        common::skip(&"the read budget is the epoll backend's");
        handle.shutdown();
        handle.join().unwrap();
        return;
    }
    let mut stream = common::client(handle.local_addrs()[0]);
    let stop = Arc::new(AtomicBool::new(false));
    let flooding = Arc::clone(&stop);
    let flooder = std::thread::spawn(move || {
        let chunk = vec![7u8; 64 * 1024];
        let mut sent = 0;
        while sent < FLOOD_BYTES && !flooding.load(Ordering::Acquire) {
            if stream.write_all(&chunk).is_err() {
                break;
            }
            sent += chunk.len();
        }
    });
    common::wait_until("the shard to read the flood for many turns", || {
        turns.load(Ordering::Acquire) >= TURNS || flooder.is_finished()
    });
    stop.store(true, Ordering::Release);
    handle.shutdown();
    handle.join().unwrap();
    flooder.join().unwrap();
    let most = most.load(Ordering::Acquire);
    // A turn reads a listed connection first, with one budget; only if that read emptied the
    // socket can an edge of the same turn read it again, with a second one. The last read of
    // each may start one chunk short of its budget.
    let bound = 2 * READ_BUDGET + CHUNK as usize;
    assert!(
        most <= bound,
        "one turn read {most} B from one connection, at most {bound} B may be (budget {READ_BUDGET} B)"
    );
}
