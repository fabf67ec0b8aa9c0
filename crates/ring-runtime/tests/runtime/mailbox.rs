//! Cross-shard mailboxes under load: every message arrives, in order per sender, also when
//! the bounded mailboxes are full most of the time.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use ring_runtime::{ConnId, Handler, RuntimeError, ShardCtx, ShardId, TimerId};

use crate::common;

const SHARDS: usize = 3;
const PER_PAIR: u64 = 20_000;
const BURST: u64 = 700;

enum Msg {
    Start,
    Seq { from: ShardId, seq: u64 },
}

struct Chatter {
    sent: Vec<u64>,
    expected: Vec<u64>,
    received: u64,
    done: mpsc::Sender<(ShardId, u64)>,
}

impl Chatter {
    fn send_burst(&mut self, ctx: &mut ShardCtx<Msg>) {
        let me = ctx.shard_id();
        let mut more = false;
        for dest in (0..SHARDS as u16).map(ShardId::new).filter(|&d| d != me) {
            let sent = &mut self.sent[dest.index()];
            let stop = (*sent + BURST).min(PER_PAIR);
            while *sent < stop {
                match ctx.post(
                    dest,
                    Msg::Seq {
                        from: me,
                        seq: *sent,
                    },
                ) {
                    Ok(()) => *sent += 1,
                    Err(RuntimeError::MailboxFull { .. }) => break,
                    Err(error) => panic!("post failed: {error}"),
                }
            }
            more |= *sent < PER_PAIR;
        }
        if more {
            ctx.arm_timer(Duration::ZERO, 0);
        }
    }
}

impl Handler for Chatter {
    type Message = Msg;

    fn on_accept(&mut self, _ctx: &mut ShardCtx<Msg>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_data(&mut self, _ctx: &mut ShardCtx<Msg>, _conn: ConnId, _data: Bytes) {}

    fn on_timer(&mut self, ctx: &mut ShardCtx<Msg>, _timer: TimerId, _key: u64) {
        self.send_burst(ctx);
    }

    fn on_messages(&mut self, ctx: &mut ShardCtx<Msg>, messages: Vec<Msg>) {
        for message in messages {
            match message {
                Msg::Start => self.send_burst(ctx),
                Msg::Seq { from, seq } => {
                    assert_eq!(seq, self.expected[from.index()], "order per sender");
                    self.expected[from.index()] += 1;
                    self.received += 1;
                    if self.received == PER_PAIR * (SHARDS as u64 - 1) {
                        self.done.send((ctx.shard_id(), self.received)).unwrap();
                    }
                }
            }
        }
    }
}

#[test]
fn cross_shard_batches_arrive_complete_and_in_order() {
    let (tx, rx) = mpsc::channel();
    let mut config = common::config(SHARDS);
    config.mailbox_batches = 2;
    config.max_pending_posts = 1500;
    let Some(handle) = common::start(config, move |_| Chatter {
        sent: vec![0; SHARDS],
        expected: vec![0; SHARDS],
        received: 0,
        done: tx.clone(),
    }) else {
        return;
    };
    for shard in 0..SHARDS as u16 {
        let mut batch = vec![Msg::Start];
        while let Err(rejected) = handle.post(ShardId::new(shard), batch) {
            batch = rejected.messages;
            std::thread::yield_now();
        }
    }
    let mut finished: Vec<ShardId> = (0..SHARDS)
        .map(|_| {
            let (shard, received) = rx.recv_timeout(common::HANG).expect("all messages arrive");
            assert_eq!(received, PER_PAIR * (SHARDS as u64 - 1));
            shard
        })
        .collect();
    finished.sort();
    assert_eq!(
        finished,
        (0..SHARDS as u16).map(ShardId::new).collect::<Vec<_>>()
    );
    handle.shutdown();
    let stats = handle.join().unwrap();
    println!(
        "flushes that met a full mailbox: {}",
        stats.iter().map(|s| s.mailbox_full).sum::<u64>()
    );
}

#[test]
fn post_to_unknown_shard_is_rejected() {
    let Some(handle) = common::start(common::config(1), |_| common::Echo) else {
        return;
    };
    let rejected = handle.post(ShardId::new(5), vec![()]).unwrap_err();
    assert_eq!(rejected.messages.len(), 1);
}
