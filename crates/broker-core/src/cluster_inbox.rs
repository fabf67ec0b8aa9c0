//! The shards' mailboxes as the cluster link sees them ([`broker_api::ClusterInbox`]): what the
//! link receives becomes a [`ShardMsg`] posted through the runtime.

use broker_api::{ClusterInbound, ClusterInbox, PostRefused};
use ring_runtime::{Poster, ShardId};

use crate::message::ShardMsg;

/// Posts the cluster link's messages into the shards' mailboxes.
pub struct ShardInbox(pub Poster<ShardMsg>);

impl ClusterInbox for ShardInbox {
    fn shard_count(&self) -> usize {
        self.0.shard_count()
    }

    fn post(&self, shard: ShardId, messages: Vec<ClusterInbound>) -> Result<(), PostRefused> {
        let messages = messages.into_iter().map(ShardMsg::from).collect();
        self.0.post(shard, messages).map_err(|_| PostRefused)
    }
}

impl From<ClusterInbound> for ShardMsg {
    fn from(inbound: ClusterInbound) -> Self {
        match inbound {
            ClusterInbound::Publish(publish) => Self::Cluster(publish),
            ClusterInbound::Ownership(answer) => Self::ClusterOwnership(answer),
            ClusterInbound::Release(request) => Self::ClusterRelease(request),
            ClusterInbound::ReleaseTaken(client_id) => Self::ClusterReleaseTaken(client_id),
        }
    }
}
