//! Timers fire, and reset/cancel are honoured.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use ring_runtime::{ConnId, Handler, ShardCtx, TimerId};

use crate::common;

/// Arms timers per connection: key 1 at 20 ms, key 2 at 30 ms (cancelled at once), key 3 at
/// 10 ms reset to 40 ms, key 4 at 0 ms. Each firing sends its key; after key 3 it closes.
struct Timers {
    conn: Option<ConnId>,
    fired_four: bool,
}

impl Handler for Timers {
    type Message = ();

    fn on_accept(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, _peer: SocketAddr) {
        self.conn = Some(conn);
        ctx.arm_timer(Duration::from_millis(20), 1);
        let cancelled = ctx.arm_timer(Duration::from_millis(30), 2);
        assert!(ctx.cancel_timer(cancelled));
        assert!(!ctx.cancel_timer(cancelled), "second cancel is a no-op");
        let moved = ctx.arm_timer(Duration::from_millis(10), 3);
        assert!(ctx.reset_timer(moved, ctx.now() + Duration::from_millis(40)));
        ctx.arm_timer(Duration::ZERO, 4);
    }

    fn on_data(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _data: Bytes) {}

    fn on_timer(&mut self, ctx: &mut ShardCtx<()>, timer: TimerId, key: u64) {
        assert!(!ctx.cancel_timer(timer), "a fired timer is stale");
        let conn = self.conn.expect("timers armed after accept");
        if key == 4 {
            self.fired_four = true;
        }
        ctx.send(conn, Bytes::from(vec![key as u8])).unwrap();
        if key == 3 {
            ctx.close(conn);
        }
    }
}

#[test]
fn timers_fire_and_reset_cancel_are_honoured() {
    let Some(handle) = common::start(common::config(1), |_| Timers {
        conn: None,
        fired_four: false,
    }) else {
        return;
    };
    let mut stream = common::client(handle.local_addrs()[0]);
    let mut keys = common::read_to_end(&mut stream);
    keys.sort_unstable();
    assert_eq!(
        keys,
        vec![1, 3, 4],
        "cancelled key 2 never fires; reset key 3 fires once"
    );
}
