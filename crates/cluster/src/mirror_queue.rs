//! The queue of the shards' mirror operations towards the cluster thread (`mirror.rs`), carried
//! out one after another, and the fence a release waits on: a session released to another
//! node leaves only once the mirror writes its shard queued for it before are done, so that
//! none of them lands after the new owner mirrored the session (an old snapshot or queued copy
//! over the new owner's record).

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use broker_api::cluster::MirrorOp;
use codec::MqttStr;

/// One entry of the mirror queue.
#[derive(Debug)]
pub(super) enum MirrorWork {
    /// A shard's operation.
    Op(MirrorOp),
    /// Answered once every entry queued before it is carried out.
    Fence(oneshot::Sender<()>),
}

/// The sending end a release waits through, and a claim queues its removal through.
#[derive(Clone, Debug)]
pub(super) struct MirrorFence(mpsc::Sender<MirrorWork>);

impl MirrorFence {
    pub(super) fn new(queue: mpsc::Sender<MirrorWork>) -> Self {
        Self(queue)
    }

    /// Waits until what is queued now is carried out; `false` when that took longer than
    /// `within` (the queue is long, or the buckets are not open yet).
    pub(super) async fn passed(&self, within: Duration) -> bool {
        let (done, passed) = oneshot::channel();
        let waited =
            async { self.0.send(MirrorWork::Fence(done)).await.is_ok() && passed.await.is_ok() };
        tokio::time::timeout(within, waited).await.unwrap_or(false)
    }

    /// Queues the removal of what is mirrored of `client_id`'s session, waiting at most
    /// `within` for room; whether it was queued.
    pub(super) async fn forget(&self, client_id: MqttStr, within: Duration) -> bool {
        let forget = MirrorWork::Op(MirrorOp::Forget { client_id });
        self.0.send_timeout(forget, within).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_fence_passes_once_the_work_before_it_is_taken() {
        let (queue, mut work) = mpsc::channel(4);
        let fence = MirrorFence::new(queue.clone());
        queue
            .send(MirrorWork::Op(MirrorOp::Forget {
                client_id: codec::MqttStr::try_from("a").unwrap(),
            }))
            .await
            .unwrap();
        let short = Duration::from_millis(20);
        assert!(!fence.passed(short).await, "nothing carried out yet");
        let carried = tokio::spawn(async move {
            let mut ops = 0;
            while let Some(entry) = work.recv().await {
                match entry {
                    MirrorWork::Op(_) => ops += 1,
                    MirrorWork::Fence(done) => {
                        let _ = done.send(());
                    }
                }
            }
            ops
        });
        assert!(fence.passed(Duration::from_secs(30)).await);
        drop((fence, queue));
        assert_eq!(carried.await.unwrap(), 1);
    }

    #[tokio::test]
    async fn a_forget_queues_behind_earlier_work_and_gives_up_on_a_full_queue() {
        let (queue, mut work) = mpsc::channel(1);
        let fence = MirrorFence::new(queue);
        let a = codec::MqttStr::try_from("a").unwrap();
        let short = Duration::from_millis(20);
        assert!(fence.forget(a.clone(), short).await);
        assert!(!fence.forget(a, short).await, "no room: not waited for");
        match work.recv().await {
            Some(MirrorWork::Op(MirrorOp::Forget { client_id })) => {
                assert_eq!(client_id.as_str(), "a");
            }
            other => panic!("expected a forget, got {other:?}"),
        }
    }
}
