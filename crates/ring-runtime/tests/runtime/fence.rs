//! Input fences: a marker sent on a connection of one shard, then at once a query on a
//! connection of another, must find the marker handled when the query's fence has passed,
//! whichever shard reads its socket first (the order of a broker with one thread).

use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use ring_runtime::{ConnId, Handler, InputFence, RuntimeConfig, ShardCtx, ShardId};

use crate::common;

const ROUNDS: u64 = 3_000;
/// A message: a kind byte and a round number.
const MESSAGE: usize = 9;

/// Marks rounds (`M`), answers queries (`Q`) once their fence has passed: 1 if the round's
/// mark was handled first on any shard, else 0.
struct Marks {
    seen: Arc<AtomicU64>,
    held: Vec<(ConnId, u64, InputFence)>,
    /// Bytes of a message not complete yet, per connection.
    partial: HashMap<ConnId, Vec<u8>>,
}

impl Marks {
    fn answer(&self, ctx: &mut ShardCtx<()>, conn: ConnId, round: u64) {
        let marked = self.seen.load(Ordering::SeqCst) >= round;
        ctx.send(conn, Bytes::from(vec![u8::from(marked)])).unwrap();
    }
}

impl Handler for Marks {
    type Message = ();

    fn on_accept(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, _peer: SocketAddr) {
        let shard = ctx.shard_id().index() as u8;
        ctx.send(conn, Bytes::from(vec![shard])).unwrap();
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        let mut bytes = self.partial.remove(&conn).unwrap_or_default();
        bytes.extend_from_slice(&data);
        let whole = bytes.len() - bytes.len() % MESSAGE;
        self.partial.insert(conn, bytes.split_off(whole));
        for message in bytes.chunks(MESSAGE) {
            let round = u64::from_le_bytes(message[1..].try_into().unwrap());
            if message[0] == b'M' {
                self.seen.fetch_max(round, Ordering::SeqCst);
                continue;
            }
            let fence = ctx.input_fence();
            if ctx.input_fence_passed(fence) {
                self.answer(ctx, conn, round);
            } else {
                ctx.insist_on_input_fence(fence);
                self.held.push((conn, round, fence));
            }
        }
    }

    fn on_input_fences_passed(&mut self, ctx: &mut ShardCtx<()>) {
        let held = std::mem::take(&mut self.held);
        for (conn, round, fence) in held {
            if ctx.input_fence_passed(fence) {
                self.answer(ctx, conn, round);
            } else {
                self.held.push((conn, round, fence));
            }
        }
    }
}

/// A connection accepted by shard `shard` (connects until the kernel spreads one there).
fn client_on(addr: SocketAddr, shard: u8) -> TcpStream {
    for _ in 0..200 {
        let mut stream = common::client(addr);
        if common::read_exact(&mut stream, 1)[0] == shard {
            return stream;
        }
    }
    panic!("no connection reached shard {shard}");
}

fn message(kind: u8, round: u64) -> Vec<u8> {
    let mut message = vec![kind];
    message.extend_from_slice(&round.to_le_bytes());
    message
}

/// Runs the rounds; returns how many queries did not find their mark.
fn misses(config: RuntimeConfig) -> Option<u64> {
    let seen = Arc::new(AtomicU64::new(0));
    let shared = Arc::clone(&seen);
    let handle = common::start(config, move |_: ShardId| Marks {
        seen: Arc::clone(&shared),
        held: Vec::new(),
        partial: HashMap::new(),
    })?;
    let addr = handle.local_addrs()[0];
    let mut marker = client_on(addr, 1);
    let mut query = client_on(addr, 0);
    let mut missed = 0;
    for round in 1..=ROUNDS {
        common::write_all(&mut marker, &message(b'M', round));
        common::write_all(&mut query, &message(b'Q', round));
        missed += u64::from(common::read_exact(&mut query, 1)[0] == 0);
    }
    handle.shutdown();
    handle.join().unwrap();
    Some(missed)
}

#[test]
fn a_query_after_a_mark_on_another_shard_always_finds_it() {
    let mut config = common::config(2);
    config.input_fences = true;
    let Some(missed) = misses(config) else {
        return;
    };
    assert_eq!(missed, 0, "queries that overtook their mark, of {ROUNDS}");
}

/// The same rounds without the board, where every fence has passed when asked: how often a
/// query overtakes its mark depends on the machine's scheduling, so this only reports it
/// (`cargo test -- --ignored --nocapture fence`).
#[test]
#[ignore = "a probe: reports how often the race happens without fences"]
fn without_fences_queries_can_overtake_their_marks() {
    let Some(missed) = misses(common::config(2)) else {
        return;
    };
    println!("without fences: {missed} of {ROUNDS} queries overtook their mark");
}
