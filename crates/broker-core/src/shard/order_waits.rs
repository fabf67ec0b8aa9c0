//! [`OrderWaits`]: the PUBLISH packets a shard holds until every other shard has handled what
//! it had received before them and this shard's replica has applied the subscription changes
//! stamped before them; `publish_order.rs` holds and releases them.

use codec::Publish;
use ring_runtime::{ConnId, InputFence};
use router::ChangeSeq;

/// PUBLISH packets waiting for subscription changes to reach this shard's replica: at most
/// one per connection (its connection is parked), so bounded by the shard's connections.
#[derive(Default)]
pub(super) struct OrderWaits {
    held: Vec<HeldPublish>,
    /// The connection whose carry is being handled right after its held PUBLISH was, and that
    /// PUBLISH's horizon, which covers what arrived before it.
    covering: Option<(ConnId, ChangeSeq)>,
}

pub(super) struct HeldPublish {
    pub(super) conn: ConnId,
    /// Every other shard must have handled what it had received when the PUBLISH arrived.
    pub(super) fence: InputFence,
    /// The replica must have applied every change below this before the PUBLISH is matched
    /// (read once the fence has passed: it then covers the SUBSCRIBEs the fence waited for).
    pub(super) horizon: Option<ChangeSeq>,
    pub(super) publish: Publish,
}

impl OrderWaits {
    /// Sets a PUBLISH aside (its connection is parked).
    pub(super) fn hold(&mut self, held: HeldPublish) {
        self.held.push(held);
    }

    /// While `conn`'s carry is handled after its release: `horizon` stands for the
    /// subscription horizon of its PUBLISH packets.
    pub(super) fn cover(&mut self, conn: ConnId, horizon: ChangeSeq) {
        self.covering = Some((conn, horizon));
    }

    /// Ends [`Self::cover`].
    pub(super) fn uncover(&mut self) {
        self.covering = None;
    }

    /// The horizon covering `conn`'s PUBLISH packets now, if its carry is being handled.
    pub(super) fn covering(&self, conn: ConnId) -> Option<ChangeSeq> {
        self.covering
            .and_then(|(covered, horizon)| (covered == conn).then_some(horizon))
    }

    /// Whether nothing is set aside.
    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Whether `conn` has a PUBLISH set aside.
    pub(super) fn holds(&self, conn: ConnId) -> bool {
        self.held.iter().any(|held| held.conn == conn)
    }

    /// Forgets what a closed connection had set aside.
    pub(super) fn forget(&mut self, conn: ConnId) {
        if !self.held.is_empty() {
            self.held.retain(|held| held.conn != conn);
        }
    }

    /// Takes out every PUBLISH whose fence has passed and whose horizon a replica that has
    /// applied up to (not including) `applied` has reached, with that horizon, in the order
    /// they were set aside; a PUBLISH whose fence has just passed gets its horizon from
    /// `horizon` first.
    pub(super) fn take_ready(
        &mut self,
        applied: ChangeSeq,
        passed: impl Fn(InputFence) -> bool,
        horizon: impl Fn() -> ChangeSeq,
    ) -> Vec<(HeldPublish, ChangeSeq)> {
        let mut ready = Vec::new();
        for mut held in std::mem::take(&mut self.held) {
            if held.horizon.is_none() && passed(held.fence) {
                held.horizon = Some(horizon());
            }
            match held.horizon {
                Some(due) if due <= applied => ready.push((held, due)),
                _ => self.held.push(held),
            }
        }
        ready
    }
}
