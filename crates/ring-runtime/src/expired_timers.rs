//! [`ShardCtx::fire_timers`]: a shard's expired timers dispatched to the handler's `on_timer`,
//! or, for a graceful close's drain deadline, turned into an abort.

use crate::close_reason::CloseReason;
use crate::conn::CloseMode;
use crate::ctx::{ShardCtx, TimerTarget};
use crate::handler::Handler;
use crate::ids::{ConnId, TimerId};

impl<M> ShardCtx<M> {
    /// Fires the timers due by `now`: handler timers through `on_timer`, drain deadlines as
    /// aborts. `fired` is scratch space. Returns whether the accept pause is over.
    pub(crate) fn fire_timers<H>(
        &mut self,
        handler: &mut H,
        fired: &mut Vec<(TimerId, TimerTarget)>,
    ) -> bool
    where
        H: Handler<Message = M>,
    {
        let mut resume_accept = false;
        self.timers.advance(self.now, fired);
        for (timer, target) in fired.drain(..) {
            match target {
                TimerTarget::User(key) => handler.on_timer(self, timer, key),
                TimerTarget::Drain(conn) => self.drain_timed_out(conn),
                TimerTarget::ResumeAccept => resume_accept = true,
                TimerTarget::Datagram(endpoint) => self.requests.expired_drivers.push(endpoint),
            }
        }
        resume_accept
    }

    /// A graceful close's drain deadline passed: abort it.
    fn drain_timed_out(&mut self, conn: ConnId) {
        if let Some(record) = self.conns.get_mut(conn) {
            record.set_drain_timer(None);
        }
        self.request_close(conn, CloseMode::Abort, Some(CloseReason::DrainTimeout));
    }
}
